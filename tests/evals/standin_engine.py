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

`--fail MODE` makes it fail the way real engines do: `refuse` (exits at start
refusing the drafter), `oom` (exits at start out of memory), `die` (healthy, then
exits on the first completion), `nospec` (serves without spec-decode counters).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1] / "src"), str(HERE.parent / "harness")]


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--speculative-config")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--fail")
    args, _ = p.parse_known_args()
    return args


def main() -> None:
    args = parse()
    spec = json.loads(args.speculative_config) if args.speculative_config else None
    print(f"standin engine pid {os.getpid()} port {args.port} spec {spec}", flush=True)
    # what vLLM logs at start: the config it runs, the dtype resolved (the stand-in runs float32)
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
    from prometheus_client import CollectorRegistry, Counter, generate_latest
    from safetensors.torch import load_file
    from test_speculative_loop import BLOCK, target_pass, zlab_window
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(1)
    registry = CollectorRegistry()
    labels = ["model_name", "engine"]
    names = ("dflash-bench", "0")
    counters = {}
    if spec and args.fail != "nospec":
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

    def decode(prompt: list[int], max_tokens: int) -> list[int]:
        logits, _ = target_pass(model, prompt)
        seq = [*prompt, int(logits[-1].argmax())]
        want = len(prompt) + max_tokens
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
            verify, _ = target_pass(model, seq + draft)
            greedy = verify[a : a + BLOCK].argmax(-1).tolist()
            k = 0
            while k < BLOCK - 1 and draft[k] == greedy[k]:
                k += 1
            if counters:
                counters["drafts"].inc()
                counters["draft_tokens"].inc(BLOCK - 1)
                counters["accepted_tokens"].inc(k)
                for i in range(k):
                    per_pos.labels(*names, str(i)).inc()
            seq += [*draft[:k], greedy[k]][: want - len(seq)]
        return seq[len(prompt) :]

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: object) -> None:
            pass

        def reply(self, status: int, body: bytes, kind: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/health":
                self.reply(200, b"")
            elif self.path == "/version":
                self.reply(200, b'{"version": "standin-1"}')
            elif self.path == "/metrics":
                self.reply(200, generate_latest(registry), "text/plain; version=0.0.4")
            else:
                self.reply(404, b"{}")

        def do_POST(self) -> None:
            if self.path != "/v1/completions":
                self.reply(404, b"{}")
                return
            doc = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if args.fail == "die":
                print("RuntimeError: engine core died unexpectedly", flush=True)
                os._exit(1)
            with lock:
                tokens = decode([int(t) for t in doc["prompt"]], int(doc["max_tokens"]))
                generated.inc(len(tokens))
                served[0] += 1
            body = {
                "object": "text_completion",
                "choices": [{"index": 0, "text": "", "finish_reason": "length"}],
                "usage": {
                    "prompt_tokens": len(doc["prompt"]),
                    "completion_tokens": len(tokens),
                    "total_tokens": len(doc["prompt"]) + len(tokens),
                },
            }
            self.reply(200, json.dumps(body).encode())

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    print(f"standin engine serving on {args.host}:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
