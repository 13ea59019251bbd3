"""A stand-in for `vllm serve` with a DFlash drafter: the real endpoints, real decoding, tiny models.

Run as the engine command of a test host (`[hosts.X] vllm = [python, this file, ...]`),
it takes vLLM's arguments (`--model`, `--speculative-config`, `--host`, `--port`;
others are ignored) and serves:

* `/health` (200 once the models are loaded), `/version`;
* `/v1/completions` with a token-id `prompt`, greedy, `max_tokens`: real greedy
  speculative decoding of the tiny transformers target with the DFlash drafter
  (the loop of `tests/harness/test_speculative_loop.py`: draft a block from the
  target's features at the drafter's layers, verify with one target forward, accept
  the longest matching prefix plus the target's token), counted as vLLM counts:
  every step adds one draft, k draft tokens and all the drafts it accepted, even
  those past `max_tokens`; the reply keeps `max_tokens` tokens. Without a
  speculative config it decodes greedily, one target forward per token;
* `/metrics` from a real prometheus_client registry with vLLM's counter names.

With `--per-request-spec-decode-metrics summary` (vLLM's flag) each completion
also carries `metrics.speculative_decoding` as vLLM writes it (`num_spec_steps`,
`num_accepted_draft_tokens`, `num_draft_tokens`, `acceptance_histogram`, ...).

Given SGLang's arguments instead (`--model-path`, `--speculative-algorithm DFLASH`,
`--speculative-draft-model-path`, `--speculative-num-draft-tokens`), it serves as
SGLang does: `/generate` with `input_ids` and `sampling_params`, answering
`meta_info` with SGLang's per-request fields (`spec_verify_ct`,
`spec_num_correct_drafts` and `spec_accepted_drafts`, `spec_num_proposed_drafts`
and `spec_proposed_drafts`, `spec_accept_rate`, `spec_accept_length` =
completion_tokens / verify steps, `spec_correct_drafts_histogram` and
`spec_accept_histogram`), `/get_server_info`, and `/metrics` with SGLang's gauges
`sglang:spec_accept_length` and `sglang:spec_accept_rate`: averages over the
server's life, as SGLang's are not counters. The counts are the same loop's.

`--fail MODE` makes it fail the way real engines do: `refuse` (exits at start
refusing the drafter), `oom` (exits at start out of memory), `die` (healthy, then
exits on the first completion), `nospec` (serves without spec-decode counters).
`--collapse-file PATH`: while PATH exists the drafter's block comes out garbled (each
draft token shifted by one in the vocabulary, as a layout mismatch after a conversion
scrambles it): still verified and counted for real, so acceptance collapses to about
1.0 in the server's counters while it stays healthy and fast.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1] / "src"), str(HERE.parent / "harness")]

from dflash_tui.demo.http_reply import QuietReplyHandler  # noqa: E402


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--model")
    p.add_argument("--speculative-config")
    p.add_argument("--per-request-spec-decode-metrics")
    p.add_argument("--model-path")  # SGLang's
    p.add_argument("--speculative-algorithm")
    p.add_argument("--speculative-draft-model-path")
    p.add_argument("--speculative-num-draft-tokens", type=int)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--fail")
    p.add_argument("--collapse-file", type=Path)
    args, _ = p.parse_known_args()
    args.sglang = args.model_path is not None
    if args.sglang:
        args.model = args.model_path
        if args.speculative_draft_model_path:
            k = (args.speculative_num_draft_tokens or 8) - 1
            args.speculative_config = json.dumps(
                {"model": args.speculative_draft_model_path, "num_speculative_tokens": k}
            )
    return args


def main() -> None:
    args = parse()
    spec = json.loads(args.speculative_config) if args.speculative_config else None
    print(f"standin engine pid {os.getpid()} port {args.port} spec {spec}", flush=True)
    # what the engine logs at start: the dtype it runs (the stand-in runs float32)
    if args.sglang:
        print("Load weight end. type=Qwen3ForCausalLM, dtype=torch.float32, avail mem=1 GB")
    else:
        print(
            f"Initializing a V1 LLM engine (vstandin-1) with config: model={args.model!r}, "
            f"speculative_config={spec}, dtype=torch.float32, max_seq_len=2048",
            flush=True,
        )
    if args.fail == "refuse" and spec:
        print(
            f"ValueError: the draft model at {spec['model']} is not a DFlash drafter this "
            "engine supports",
            flush=True,
        )
        sys.exit(1)
    if args.fail == "oom":
        print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", flush=True)
        sys.exit(1)

    import torch
    from harness_reference import anchor_logits, read_drafter
    from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
    from safetensors.torch import load_file
    from test_speculative_loop import BLOCK, target_pass, zlab_window
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(1)
    registry = CollectorRegistry()
    labels = ["model_name", "engine"]
    names = ("dflash-bench", "0")
    counters = {}
    gauges = {}
    if args.sglang:
        for key, help_text in (
            ("accept_length", "The average acceptance length of speculative decoding."),
            ("accept_rate", "The average acceptance rate of speculative decoding."),
        ):
            gauges[key] = Gauge(
                f"sglang:spec_{key}", help_text, ["model_name"], registry=registry
            ).labels("standin")
    elif spec and args.fail != "nospec":
        for key, help_text in (
            ("drafts", "Number of spec decoding drafts."),
            ("draft_tokens", "Number of draft tokens."),
            ("accepted_tokens", "Number of accepted tokens."),
        ):
            counters[key] = Counter(
                f"vllm:spec_decode_num_{key}", help_text, labels, registry=registry
            ).labels(*names)
        per_pos = Counter(
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            "Accepted tokens per draft position.",
            [*labels, "position"],
            registry=registry,
        )
        for i in range(BLOCK - 1):  # vLLM creates every position's series at start
            per_pos.labels(*names, str(i))
    generated = Counter(
        "vllm:generation_tokens",
        "Number of generation tokens processed.",
        labels,
        registry=registry,
    ).labels(*names)

    if args.fail is None:  # the failure modes never decode: they start at once
        model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
        head = load_file(str(Path(args.model) / "model.safetensors"))
        embed = head["model.embed_tokens.weight"].double()
        lm_head = head["lm_head.weight"].double()
        if spec:
            raw, weights = read_drafter(Path(spec["model"]))
            raw = zlab_window(raw)
    lock = threading.Lock()
    served = [0]
    life = {"steps": 0, "accepted": 0, "tokens": 0}  # what SGLang's gauges average over

    def decode(prompt: list[int], max_tokens: int) -> tuple[list[int], list[int]]:
        """The greedy continuation and each verify step's accepted drafts."""
        logits, _ = target_pass(model, prompt)
        seq = [*prompt, int(logits[-1].argmax())]
        want = len(prompt) + max_tokens
        steps: list[int] = []
        while len(seq) < want:
            if not spec:
                logits, _ = target_pass(model, seq)
                seq.append(int(logits[-1].argmax()))
                continue
            a = len(seq) - 1
            _, feats = target_pass(model, seq[:a])
            sample = {"input_ids": torch.tensor(seq), "hidden_states": feats}
            draft = anchor_logits(raw, weights, embed, lm_head, sample, a, "bidirectional")
            draft = draft.argmax(-1).tolist()
            if args.collapse_file is not None and args.collapse_file.exists():
                draft = [(t + 1) % lm_head.shape[0] for t in draft]
            verify, _ = target_pass(model, seq + draft)
            greedy = verify[a : a + BLOCK].argmax(-1).tolist()
            k = 0
            while k < BLOCK - 1 and draft[k] == greedy[k]:
                k += 1
            steps.append(k)
            if counters:
                counters["drafts"].inc()
                counters["draft_tokens"].inc(BLOCK - 1)
                counters["accepted_tokens"].inc(k)
                for i in range(k):
                    per_pos.labels(*names, str(i)).inc()
            seq += [*draft[:k], greedy[k]][: want - len(seq)]
        return seq[len(prompt) :], steps

    def histogram(steps: list[int]) -> list[int]:
        """Steps that accepted exactly n drafts, n = 0..k."""
        return [steps.count(n) for n in range(BLOCK)]

    def sglang_meta(prompt: list[int], tokens: list[int], steps: list[int]) -> dict:
        meta = {
            "id": f"standin-{served[0]}",
            "finish_reason": {"type": "length", "length": len(tokens)},
            "prompt_tokens": len(prompt),
            "completion_tokens": len(tokens),
            "cached_tokens": 0,
        }
        if steps:  # as SGLang fills them: only for a request that was verified
            proposed = len(steps) * (BLOCK - 1)
            correct = sum(steps)
            meta |= {
                "spec_accept_rate": correct / proposed,
                "spec_accept_length": len(tokens) / len(steps),
                "spec_num_correct_drafts": correct,
                "spec_num_proposed_drafts": proposed,
                "spec_verify_ct": len(steps),
                "spec_accepted_drafts": correct,
                "spec_proposed_drafts": proposed,
                "spec_correct_drafts_histogram": histogram(steps),
                "spec_accept_histogram": histogram(steps),
            }
            life["steps"] += len(steps)
            life["accepted"] += correct
            gauges["accept_length"].set(1 + life["accepted"] / life["steps"])
            gauges["accept_rate"].set(life["accepted"] / (life["steps"] * (BLOCK - 1)))
        return meta

    def vllm_metrics(steps: list[int]) -> dict:
        """vLLM's per-request `metrics.speculative_decoding` (summary)."""
        return {
            "speculative_decoding": {
                "mean_acceptance_length": 1 + sum(steps) / len(steps) if steps else None,
                "draft_acceptance_rate": sum(steps) / (len(steps) * (BLOCK - 1)) if steps else None,
                "acceptance_histogram": histogram(steps),
                "num_spec_steps": len(steps),
                "num_accepted_draft_tokens": sum(steps),
                "num_draft_tokens": len(steps) * (BLOCK - 1),
                "num_spec_tokens": BLOCK - 1,
            }
        }

    class Handler(QuietReplyHandler):
        def do_GET(self) -> None:
            if self.path == "/health":
                self.reply(200, b"")
            elif self.path == "/version" and not args.sglang:
                self.reply(200, b'{"version": "standin-1"}')
            elif self.path == "/get_server_info" and args.sglang:
                info = {"version": "standin-sglang-1", "model_path": args.model, "dtype": "auto"}
                self.reply(200, json.dumps(info).encode())
            elif self.path == "/metrics":
                self.reply(200, generate_latest(registry), "text/plain; version=0.0.4")
            else:
                self.reply(404, b"{}")

        def do_POST(self) -> None:
            if self.path != ("/generate" if args.sglang else "/v1/completions"):
                self.reply(404, b"{}")
                return
            doc = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if args.fail == "die":
                print("RuntimeError: engine core died unexpectedly", flush=True)
                os._exit(1)
            if args.sglang:
                prompt = [int(t) for t in doc["input_ids"]]
                with lock:
                    tokens, steps = decode(prompt, int(doc["sampling_params"]["max_new_tokens"]))
                    served[0] += 1
                    meta = sglang_meta(prompt, tokens, steps)
                self.reply(
                    200, json.dumps({"text": "", "output_ids": tokens, "meta_info": meta}).encode()
                )
                return
            with lock:
                tokens, steps = decode([int(t) for t in doc["prompt"]], int(doc["max_tokens"]))
                generated.inc(len(tokens))
                served[0] += 1
            body: dict = {
                "object": "text_completion",
                "choices": [{"index": 0, "text": "", "finish_reason": "length"}],
                "usage": {
                    "prompt_tokens": len(doc["prompt"]),
                    "completion_tokens": len(tokens),
                    "total_tokens": len(doc["prompt"]) + len(tokens),
                },
            }
            if spec and args.per_request_spec_decode_metrics:
                body["metrics"] = vllm_metrics(steps)
            self.reply(200, json.dumps(body).encode())

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    print(f"standin engine serving on {args.host}:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
