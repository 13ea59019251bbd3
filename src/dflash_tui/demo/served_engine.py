"""The demo's served engine: `vllm serve` as the served bench sees it, with real draft counts.

The demo's eval host names this module as its vLLM (`[hosts.evalbox] vllm` in the demo's
hosts.toml), so `S` on the demo's leaderboard runs the real served bench program against
it (docs/evals.md "Served bench jobs"). It takes vLLM's arguments (`--model`,
`--speculative-config`, `--host`, `--port`; the rest are ignored) and serves `/health`,
`/version`, `/v1/completions` (token-id prompts, greedy) and `/metrics` with vLLM's
spec-decode counter names.

The demo's target is a recording: its suite's cache was written as the target's greedy
answers and its features at the drafter's layers (`demo/synthetic.py`), so `--model` is
the cache's `target/` folder and the engine replays that cache. The drafting is real: at
each step the checkpoint being benched drafts a block with the harness's own forward from
the target's features, the engine keeps the drafts that match the target's tokens plus
the target's next one, and counts them as vLLM does. Served tau within max_tokens is then
the harness's `tau_greedy` on the same cache. The target's forward costs a fixed wait
(`--target-forward-ms`), standing in for a large model's forward: the speedup shows what
the accepted tokens buy when drafting is cheap, and the drafting time is real.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import torch
from prometheus_client import CollectorRegistry, Counter, generate_latest

from dflash_tui.demo.http_reply import QuietReplyHandler
from dflash_tui.shipped.harness.cache import (
    TargetHead,
    check_sample,
    load_features,
    read_manifest,
)
from dflash_tui.shipped.harness.drafter import DrafterFiles
from dflash_tui.shipped.harness.errors import InputError, Problems
from dflash_tui.shipped.harness.model import ContextKV, DrafterModel, block_logits

VERSION = "dflash-demo-1"
LABELS = ("model_name", "engine")


@dataclass(frozen=True)
class Recorded:
    """One prompt the target has answered: its tokens and features, and where the answer starts."""

    ids: torch.Tensor  # [T] int64: prompt then the target's greedy continuation
    features: torch.Tensor  # [T, n_layers*H] float32
    start: int  # the first continuation position (the token prefill emits)


def read_recording(
    target: Path,
) -> tuple[dict[tuple[int, ...], Recorded], torch.Tensor, torch.Tensor]:
    """The prompts the target at `target` answered (its cache is the folder holding it),
    and its (embed_tokens, lm_head); InputError when `target` is no demo cache's target."""
    cache = target.resolve().parent
    manifest = read_manifest(cache)
    if manifest.target_dir != target.resolve():
        raise InputError(
            f"demo engine: {target} is not the target of a demo suite cache "
            f"({cache}/manifest.json names {manifest.target_dir or 'a head file'})",
            hint="the demo's engine serves only the demo suite's target (eval/coding10/target)",
        )
    problems = Problems()
    answers: dict[tuple[int, ...], Recorded] = {}
    for spec in manifest.samples:
        check_sample(spec, problems)
        problems.raise_if_any(f"demo engine: cache {cache} has unreadable samples:")
        assert spec.input_ids is not None and spec.loss_mask is not None  # checked above
        on = torch.nonzero(spec.loss_mask).flatten().tolist()
        if not on or on[0] == 0:
            continue
        feats = load_features(spec, spec.length).float()
        answers[tuple(spec.input_ids[: on[0]].tolist())] = Recorded(spec.input_ids, feats, on[0])
    embed, lm_head = TargetHead(manifest).load()
    return answers, embed.float(), lm_head.float()


class Drafter:
    """The benched checkpoint, drafting one block at a time with the harness's forward."""

    def __init__(self, path: Path, embed: torch.Tensor, lm_head: torch.Tensor, k: int | None):
        files = DrafterFiles(path)
        self.cfg = files.config
        self.model = DrafterModel(self.cfg, files.load(torch.device("cpu"), torch.float32))
        self.embed, self.lm_head = embed, lm_head
        self.k = min(k or self.cfg.block_size - 1, self.cfg.block_size - 1)

    def context(self, features: torch.Tensor) -> ContextKV:
        return self.model.context(features)

    def draft(self, context: ContextKV, ids: torch.Tensor, anchor: int) -> list[int]:
        """The k tokens drafted after position `anchor` (greedy: each position's argmax)."""
        x = self.model.embed_block(self.embed, ids[anchor : anchor + 1])
        hidden = self.model.block_hidden(
            [context], torch.zeros(1, dtype=torch.long), torch.tensor([anchor]), x
        )
        with torch.inference_mode():
            logits = block_logits(self.cfg, hidden, self.lm_head)[0]
        return [int(t) for t in logits.argmax(-1)[: self.k]]


class Counts:
    """vLLM's counters in a real prometheus_client registry (`/metrics`)."""

    def __init__(self, k: int | None) -> None:
        self.registry = CollectorRegistry()
        names = ("dflash-bench", "0")
        self.generated = Counter(
            "vllm:generation_tokens", "Number of generation tokens processed.", LABELS,
            registry=self.registry,
        ).labels(*names)  # fmt: skip
        self.spec: dict[str, Any] = {}
        if k is None:
            return
        for key, text in (
            ("drafts", "Number of spec decoding drafts."),
            ("draft_tokens", "Number of draft tokens."),
            ("accepted_tokens", "Number of accepted tokens."),
        ):
            self.spec[key] = Counter(
                f"vllm:spec_decode_num_{key}", text, LABELS, registry=self.registry
            ).labels(*names)
        per_pos = Counter(
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            "Accepted tokens per draft position.",
            [*LABELS, "position"],
            registry=self.registry,
        )
        self.per_pos = [per_pos.labels(*names, str(i)) for i in range(k)]  # all, as vLLM does

    def step(self, k: int, accepted: int) -> None:
        self.spec["drafts"].inc()
        self.spec["draft_tokens"].inc(k)
        self.spec["accepted_tokens"].inc(accepted)
        for i in range(accepted):
            self.per_pos[i].inc()


class Engine:
    """Greedy decoding of recorded prompts, speculative when a drafter is given."""

    def __init__(
        self,
        answers: dict[tuple[int, ...], Recorded],
        drafter: Drafter | None,
        forward_s: float,
    ):
        self.answers, self.drafter, self.forward_s = answers, drafter, forward_s
        self.counts = Counts(drafter.k if drafter else None)
        self.lock = threading.Lock()

    def target_forward(self) -> None:
        time.sleep(self.forward_s)

    def complete(self, prompt: Sequence[int], max_tokens: int) -> int:
        """Decode `max_tokens` tokens after `prompt`; returns how many were emitted."""
        rec = self.answers.get(tuple(prompt))
        if rec is None:
            raise LookupError("the demo's target knows only the prompts of its suite's cache")
        room = len(rec.ids) - rec.start
        if not 0 < max_tokens <= room:
            raise LookupError(f"max_tokens {max_tokens}: this prompt's answer has {room} tokens")
        last = rec.start + max_tokens - 1  # the last position to emit
        with self.lock:
            self.target_forward()  # prefill: emits the token at rec.start
            at = rec.start
            context = self.drafter.context(rec.features) if self.drafter else None
            while at < last:
                if self.drafter is None or context is None:
                    self.target_forward()
                    at += 1
                    continue
                drafted = self.drafter.draft(context, rec.ids, at)
                truth = rec.ids[at + 1 : at + 1 + len(drafted)].tolist()
                matched = 0
                while matched < len(truth) and drafted[matched] == truth[matched]:
                    matched += 1
                self.target_forward()  # the verify pass: the drafts and the target's next token
                self.counts.step(self.drafter.k, matched)
                at += min(matched + 1, last - at)
            self.counts.generated.inc(max_tokens)
        return max_tokens


def serve(engine: Engine, host: str, port: int) -> None:
    class Handler(QuietReplyHandler):
        def do_GET(self) -> None:
            if self.path == "/health":
                self.reply(200, b"")
            elif self.path == "/version":
                self.reply(200, json.dumps({"version": VERSION}).encode())
            elif self.path == "/metrics":
                self.reply(
                    200, generate_latest(engine.counts.registry), "text/plain; version=0.0.4"
                )
            else:
                self.reply(404, b"{}")

        def do_POST(self) -> None:
            if self.path != "/v1/completions":
                self.reply(404, b"{}")
                return
            doc = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            prompt = [int(t) for t in doc.get("prompt", [])]
            try:
                emitted = engine.complete(prompt, int(doc.get("max_tokens", 16)))
            except LookupError as exc:
                self.reply(400, json.dumps({"error": {"message": str(exc)}}).encode())
                return
            usage = {"prompt_tokens": len(prompt), "completion_tokens": emitted}
            usage["total_tokens"] = len(prompt) + emitted
            choice = {"index": 0, "text": "", "finish_reason": "length"}
            body = {"object": "text_completion", "choices": [choice], "usage": usage}
            self.reply(200, json.dumps(body).encode())

    server = ThreadingHTTPServer((host, port), Handler)
    print(f"demo engine serving on {host}:{port}", flush=True)
    server.serve_forever()


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="dflash_tui.demo.served_engine", description=__doc__)
    p.add_argument("--model", required=True, type=Path, help="the demo suite's target/ folder")
    p.add_argument("--speculative-config", help="vLLM's JSON: model, num_speculative_tokens")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--target-forward-ms", type=float, default=10.0, help="one target forward")
    args, _ = p.parse_known_args(argv)  # vLLM's other arguments mean nothing here
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    spec = json.loads(args.speculative_config) if args.speculative_config else None
    print(f"demo engine pid {os.getpid()} target {args.model} spec {spec}", flush=True)
    torch.set_num_threads(1)
    try:
        answers, embed, lm_head = read_recording(args.model)
        drafter = None
        if spec:
            k = spec.get("num_speculative_tokens")
            drafter = Drafter(
                Path(spec["model"]), embed, lm_head, k if isinstance(k, int) else None
            )
    except InputError as exc:
        print(exc.render(), file=sys.stderr, flush=True)
        return 1
    serve(Engine(answers, drafter, args.target_forward_ms / 1000.0), args.host, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
