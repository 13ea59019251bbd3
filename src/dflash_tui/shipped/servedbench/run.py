"""One served bench: the speculative phase, then the baseline, each with its own engine.

Each task (the samples of one name) is bracketed by `/metrics` reads: served tau
= 1 + d(accepted) / d(drafts), position i's rate = d(accepted at i) / d(drafts).
On the same prompts vLLM counts accepted drafts past `max_tokens`: every verify
step adds its accepted drafts plus one token, the prefill one token, and the
request keeps only `max_tokens`, so past_end = requests + drafts + accepted -
output tokens, and `1 + (accepted - past_end) / drafts` is what the cache's
greedy walk (`tau_greedy`) counts. Both are written; the board compares them.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..common.errors import RunFailure
from . import FORMAT
from .client import Counters, http_get, post_json, read_counters
from .engine import Engine, EngineSpec, check_command, check_port_free, free_port
from .prompts import Prompt, prompts_sha256, protocol_of, read_prompts

Emit = Callable[[dict[str, Any]], None]
DYING_S = 10.0  # how long a failed request waits for the engine's exit before blaming the request


@dataclass(frozen=True)
class Options:
    engine: str
    command: tuple[str, ...]
    target: str
    drafter: str
    cache: Path
    out: Path
    k: int
    concurrency: int = 1
    dtype: str = "auto"
    port: int = 0
    health_timeout_s: float = 900.0
    request_timeout_s: float = 600.0
    baseline: bool = True
    extra: tuple[str, ...] = ()


def _tasks(prompts: list[Prompt]) -> dict[str, list[Prompt]]:
    tasks: dict[str, list[Prompt]] = {}
    for p in prompts:
        tasks.setdefault(p.task, []).append(p)
    return tasks


def _gpu() -> tuple[str, int]:
    """The GPUs this job sees (CUDA_VISIBLE_DEVICES, named by nvidia-smi), or ("cpu", 0)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "cpu", 0
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(
            [smi, "--query-gpu=index,name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout
        rows = [line.split(",", 1) for line in out.splitlines() if "," in line]
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible is not None:
            wanted = {v.strip() for v in visible.split(",") if v.strip()}
            rows = [r for r in rows if r[0].strip() in wanted]
        if rows:
            return rows[0][1].strip(), len(rows)
    return "unknown", 0


class Phase:
    """One engine's life: start, health, the prompts task by task, stop (always)."""

    def __init__(self, opts: Options, name: str, drafter: str | None, port: int, emit: Emit):
        self.opts, self.name, self.emit = opts, name, emit
        spec = EngineSpec(
            opts.engine, opts.command, opts.target, drafter, opts.k, opts.dtype, port, opts.extra
        )
        self.engine = Engine(spec, opts.out.parent / f"engine-{name}.log")
        self.version: str | None = None

    def __enter__(self) -> Phase:
        self.emit({"event": "phase", "phase": self.name, "state": "starting"})
        self.engine.start()
        try:
            self.engine.wait_healthy(self.opts.health_timeout_s, lambda _w: None)
        except BaseException:
            self.engine.stop()  # no __exit__ for a failed __enter__
            raise
        with contextlib.suppress(OSError, ValueError):
            status, body = http_get(f"{self.engine.url}/version", timeout=5.0)
            if status == 200:
                self.version = str(json.loads(body).get("version"))
        self.emit({"event": "phase", "phase": self.name, "state": "serving"})
        return self

    def __exit__(self, *_: object) -> None:
        self.engine.stop()

    def counters(self) -> Counters:
        try:
            return read_counters(self.engine.url)
        except (OSError, ValueError) as exc:
            if self.engine.exits_within(DYING_S):
                raise self.engine.died("mid-run") from None
            raise RunFailure(f"cannot read {self.engine.url}/metrics: {exc}") from None

    def request(self, prompt: Prompt) -> dict[str, Any]:
        """One greedy completion of `prompt`: its output tokens and the engine's own counts."""
        doc: dict[str, Any]
        if self.opts.engine == "sglang":
            url, doc = (
                f"{self.engine.url}/generate",
                {
                    "input_ids": list(prompt.input_ids),
                    "sampling_params": {
                        "temperature": 0,
                        "max_new_tokens": prompt.max_tokens,
                        "ignore_eos": True,
                    },
                },
            )
        else:
            url, doc = (
                f"{self.engine.url}/v1/completions",
                {
                    "model": "dflash-bench",
                    "prompt": list(prompt.input_ids),
                    "max_tokens": prompt.max_tokens,
                    "temperature": 0,
                    # the cached continuation ends where the target ended it (its end
                    # token included): exactly max_tokens, as the cache holds
                    "ignore_eos": True,
                },
            )
        try:
            status, body = post_json(url, doc, self.opts.request_timeout_s)
        except OSError as exc:
            if self.engine.exits_within(DYING_S):
                raise self.engine.died("mid-run") from None
            raise RunFailure(f"request to {url} failed: {exc}") from None
        if status != 200 or not isinstance(body, dict):
            if self.engine.exits_within(DYING_S):
                raise self.engine.died("mid-run")
            raise RunFailure(f"{url} answered {status}: {str(body)[:300]}")
        if self.opts.engine == "sglang":
            meta = body.get("meta_info", {})
            out = {"output_tokens": int(meta.get("completion_tokens", 0))}
            if meta.get("spec_verify_ct"):
                out["verify_steps"] = int(meta["spec_verify_ct"])
            return out
        usage = body.get("usage") or {}
        return {"output_tokens": int(usage.get("completion_tokens", 0))}

    def task(self, name: str, prompts: list[Prompt], done: Callable[[], None]) -> dict[str, Any]:
        """Send `prompts` (`concurrency` at a time), bracketed by /metrics reads."""
        before = self.counters() if self.opts.engine == "vllm" else None
        start = time.monotonic()
        pool = ThreadPoolExecutor(max_workers=self.opts.concurrency)
        try:
            futures = [pool.submit(self.request, p) for p in prompts]
            answers = []
            for f in futures:
                answers.append(f.result())
                done()
        finally:  # a failure or SIGTERM must not wait for requests in flight
            pool.shutdown(wait=False, cancel_futures=True)
        wall = time.monotonic() - start
        output = sum(a["output_tokens"] for a in answers)
        row: dict[str, Any] = {
            "requests": len(prompts),
            "output_tokens": output,
            "max_tokens": sum(p.max_tokens for p in prompts),
            "wall_s": wall,
            "tok_s": output / wall if wall > 0 else None,
        }
        if before is not None:
            after = self.counters()
            row.update(_spec_figures(before, after, len(prompts), output))
        steps = [a["verify_steps"] for a in answers if "verify_steps" in a]
        if steps and len(steps) == len(answers):
            row["per_request_tau"] = [
                (a["output_tokens"] - 1) / a["verify_steps"] if a["verify_steps"] else None
                for a in answers
            ]
        return row


def _spec_figures(before: Counters, after: Counters, requests: int, output: int) -> dict[str, Any]:
    if before.drafts is None or after.drafts is None or after.accepted is None:
        return {}
    drafts = after.drafts - before.drafts
    accepted = after.accepted - (before.accepted or 0.0)
    if drafts <= 0:
        return {"drafts": 0, "accepted": accepted}
    draft_tokens = (after.draft_tokens or 0.0) - (before.draft_tokens or 0.0)
    past_end = requests + drafts + accepted - output
    positions = sorted(after.per_position)
    return {
        "drafts": int(drafts),
        "draft_tokens": int(draft_tokens),
        "accepted": int(accepted),
        "served_tau": 1.0 + accepted / drafts,
        "past_end": int(past_end),
        "tau_within_max_tokens": 1.0 + (accepted - past_end) / drafts,
        "per_position": [
            (after.per_position[i] - before.per_position.get(i, 0.0)) / drafts for i in positions
        ],
    }


def _suite(rows: dict[str, dict[str, Any]], keys: tuple[str, ...]) -> dict[str, float]:
    return {k: sum(r.get(k) or 0 for r in rows.values()) for k in keys}


def run(opts: Options, emit: Emit) -> dict[str, Any]:
    """The whole bench; returns the dflash-served/1 document (also written to `opts.out`)."""
    prompts = read_prompts(opts.cache)
    tasks = _tasks(prompts)
    host_key = opts.engine
    check_command(opts.engine, opts.command, host_key)
    port = opts.port or free_port()
    check_port_free(port)
    total = len(prompts) * (2 if opts.baseline else 1)
    sent = [0]

    def done() -> None:
        sent[0] += 1
        emit({"event": "progress", "done": sent[0], "total": total})

    emit({"event": "start", "prompts": len(prompts), "tasks": list(tasks), "port": port})
    emit({"event": "progress", "done": 0, "total": total})
    gpu_name, gpu_count = _gpu()
    spec_rows: dict[str, dict[str, Any]] = {}
    base_rows: dict[str, dict[str, Any]] = {}
    with Phase(opts, "speculative", opts.drafter, port, emit) as phase:
        first = phase.counters() if opts.engine == "vllm" else None
        if first is not None and not first.has_spec:
            raise RunFailure(
                f"{phase.engine.url}/metrics has no spec-decode counters "
                "(vllm:spec_decode_num_drafts_total, ..._accepted_tokens_total): the engine "
                "is not drafting with the checkpoint",
                hint="check that the engine accepted --speculative-config (its log) and that "
                "it is a vLLM with DFlash support",
            )
        version = phase.version
        for name, group in tasks.items():
            spec_rows[name] = phase.task(name, group, done)
    if opts.baseline:
        with Phase(opts, "baseline", None, port, emit) as phase:
            for name, group in tasks.items():
                base_rows[name] = phase.task(name, group, done)
    doc = _document(opts, prompts, spec_rows, base_rows, version, gpu_name, gpu_count)
    part = opts.out.with_name(opts.out.name + ".part")
    part.write_text(json.dumps(doc, indent=1) + "\n")
    part.replace(opts.out)
    return doc


def _document(
    opts: Options,
    prompts: list[Prompt],
    spec_rows: dict[str, dict[str, Any]],
    base_rows: dict[str, dict[str, Any]],
    version: str | None,
    gpu_name: str,
    gpu_count: int,
) -> dict[str, Any]:
    tasks: dict[str, Any] = {}
    for name, row in spec_rows.items():
        base = base_rows.get(name, {})
        speedup = row["tok_s"] / base["tok_s"] if row.get("tok_s") and base.get("tok_s") else None
        tasks[name] = {**row, "baseline_tok_s": base.get("tok_s"), "speedup": speedup}
    keys = ("requests", "output_tokens", "wall_s", "drafts", "draft_tokens", "accepted", "past_end")
    s = _suite(spec_rows, keys)
    b = _suite(base_rows, ("output_tokens", "wall_s"))
    suite: dict[str, Any] = {
        "requests": int(s["requests"]),
        "output_tokens": int(s["output_tokens"]),
        "tok_s": s["output_tokens"] / s["wall_s"] if s["wall_s"] else None,
        "baseline_tok_s": b["output_tokens"] / b["wall_s"] if b["wall_s"] else None,
    }
    suite["speedup"] = (
        suite["tok_s"] / suite["baseline_tok_s"]
        if suite["tok_s"] and suite["baseline_tok_s"]
        else None
    )
    if s["drafts"]:
        suite.update(
            drafts=int(s["drafts"]),
            accepted=int(s["accepted"]),
            past_end=int(s["past_end"]),
            served_tau=1.0 + s["accepted"] / s["drafts"],
            tau_within_max_tokens=1.0 + (s["accepted"] - s["past_end"]) / s["drafts"],
        )
    return {
        "format": FORMAT,
        "settings": {
            "engine": opts.engine,
            "engine_version": version,
            "k": opts.k,
            "dtype": opts.dtype,
            "gpu": gpu_name,
            "gpu_count": gpu_count,
            "concurrency": opts.concurrency,
            "max_tokens": "continuation",
            "temperature": 0.0,
            "prompts_sha256": prompts_sha256(prompts),
            "protocol": protocol_of(opts.cache),
        },
        "target": opts.target,
        "drafter": opts.drafter,
        "host": platform.node(),
        "python": sys.version.split()[0],
        "finished_at": time.time(),
        "tasks": tasks,
        "suite": suite,
    }
