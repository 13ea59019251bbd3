"""One served bench: the speculative phase, then the baseline, each with its own engine.

Each phase first sends every prompt once uncounted by the clock (the counting
pass, which also warms the engine): each task is bracketed by `/metrics` reads:
served tau = 1 + d(accepted) / d(drafts), position i's rate = d(accepted at i) /
d(drafts). On the same prompts vLLM counts accepted drafts past `max_tokens`:
every verify step adds its accepted drafts plus one token, the prefill one token,
and the request keeps only `max_tokens`, so past_end = requests + drafts +
accepted - output tokens, and `1 + (accepted - past_end) / drafts` is what the
cache's greedy walk (`tau_greedy`) counts. Both are written; the board compares them.

Then `rounds` timed rounds send every task again; each task's throughput is the
mean over its rounds and its speedup carries the rounds' 95% interval
(`spread.ratio_interval`): on a loaded host one round's throughput can be off by
2x, and a speedup whose interval holds 1.0 is marked as such.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..common.errors import RunFailure
from .baselines import BaselineStore, digest
from .client import Counters
from .document import Measured, document
from .engine import check_command, check_port_free, free_port
from .options import Options
from .perrequest import Counts, from_counters, record
from .phase import Answer, Emit, Phase
from .prompts import Prompt, prompts_sha256, read_prompts
from .spread import add_histograms, request_spread


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


def _send(
    phase: Phase, prompts: list[Prompt], concurrency: int, done: Callable[[], None]
) -> tuple[list[Answer], float]:
    """Every prompt, `concurrency` at a time: the answers in prompt order and the wall time."""
    start = time.monotonic()
    pool = ThreadPoolExecutor(max_workers=concurrency)
    try:
        futures = [pool.submit(phase.request, p) for p in prompts]
        answers = []
        for f in futures:
            answers.append(f.result())
            done()
    finally:  # a failure or SIGTERM must not wait for requests in flight
        pool.shutdown(wait=False, cancel_futures=True)
    return answers, time.monotonic() - start


def _one_by_one(
    phase: Phase, prompts: list[Prompt], done: Callable[[], None], before: Counters
) -> tuple[list[Answer], list[Counts | None], Counters]:
    """Each prompt alone, between two `/metrics` reads (concurrency 1): the answers, each
    request's counts (the engine's own where it gave them) and the last read."""
    answers, counts = [], []
    for prompt in prompts:
        answer = phase.request(prompt)
        done()
        after = phase.counters()
        answers.append(answer)
        counts.append(answer.counts or from_counters(before, after, phase.opts.k))
        before = after
    return answers, counts, before


def _counting_pass(
    phase: Phase, name: str, prompts: list[Prompt], concurrency: int, done: Callable[[], None]
) -> dict[str, Any]:
    """The task once, untimed: its output, the engine's counts for the task (the /metrics
    difference on vLLM, the sum of per-request `meta_info` on SGLang) and per request."""
    vllm = phase.opts.engine == "vllm"
    first = phase.counters() if vllm else None
    last: Counters | None
    if first is not None and concurrency == 1:
        answers, counts, last = _one_by_one(phase, prompts, done, first)
    else:
        answers, _ = _send(phase, prompts, concurrency, done)
        counts = [a.counts for a in answers]
        last = phase.counters() if vllm else None
    output = sum(a.output_tokens for a in answers)
    row: dict[str, Any] = {
        "requests": len(prompts),
        "output_tokens": output,
        "max_tokens": sum(p.max_tokens for p in prompts),
    }
    requests = [
        record(name, a.prompt_tokens, a.output_tokens, c)
        for a, c in zip(answers, counts, strict=True)
    ]
    if first is not None and last is not None:
        row.update(_spec_figures(first, last, len(prompts), output))
    elif any(c is not None for c in counts):
        row.update(_summed_figures(requests, phase.opts.k))
    if any("tau" in r for r in requests):
        row["per_request"] = requests
        row.update(request_spread(requests))
    return row


def _summed_figures(requests: list[dict[str, Any]], k: int) -> dict[str, Any]:
    """The task's figures from its requests' own counts (SGLang's `meta_info`): never from
    SGLang's /metrics, whose acceptance is a gauge averaged over the server's life."""
    drafts = sum(r.get("drafts", 0) for r in requests)
    if not drafts:
        return {}
    accepted = sum(r.get("accepted", 0) for r in requests)
    past_end = sum(r.get("past_end", 0) for r in requests)
    out: dict[str, Any] = {
        "drafts": drafts,
        "accepted": accepted,
        "served_tau": 1.0 + accepted / drafts,
        "past_end": past_end,
        "tau_within_max_tokens": 1.0 + (accepted - past_end) / drafts,
    }
    if all("draft_tokens" in r for r in requests if "drafts" in r):
        out["draft_tokens"] = sum(r.get("draft_tokens", 0) for r in requests)
    hist = add_histograms([r["histogram"] for r in requests if "histogram" in r])
    if hist and sum(hist) == drafts:  # position i accepted by every step accepting > i
        out["per_position"] = [sum(hist[i + 1 :]) / drafts for i in range(min(k, len(hist) - 1))]
    return out


def measure(
    phase: Phase,
    tasks: dict[str, list[Prompt]],
    concurrency: int,
    done: Callable[[], None],
) -> tuple[dict[str, dict[str, Any]], list[float]]:
    """Each task's counting pass, then `rounds` timed rounds over every task in turn:
    the task rows (with `tok_s_rounds`) and the suite's throughput per round."""
    rows = {
        name: _counting_pass(phase, name, group, concurrency, done) for name, group in tasks.items()
    }
    suite_rounds = []
    for _ in range(phase.opts.rounds):
        out_total, wall_total = 0, 0.0
        for name, group in tasks.items():
            answers, wall = _send(phase, group, concurrency, done)
            output = sum(a.output_tokens for a in answers)
            rows[name].setdefault("tok_s_rounds", []).append(output / wall if wall > 0 else 0.0)
            rows[name]["wall_s"] = rows[name].get("wall_s", 0.0) + wall
            out_total, wall_total = out_total + output, wall_total + wall
        suite_rounds.append(out_total / wall_total if wall_total > 0 else 0.0)
    for row in rows.values():
        timed = row.get("tok_s_rounds") or []
        row["tok_s"] = statistics.fmean(timed) if timed else None
    return rows, suite_rounds


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


def run(opts: Options, emit: Emit) -> dict[str, Any]:
    """The whole bench; returns the dflash-served/1 document (also written to `opts.out`).

    One engine with the drafter measures every concurrency level in turn, then one
    engine serving the target alone measures the levels whose baseline the host does
    not keep (none: that engine never starts)."""
    prompts = read_prompts(opts.cache)
    tasks = _tasks(prompts)
    check_command(opts.engine, opts.command, opts.engine)
    port = opts.port or free_port()
    check_port_free(port)
    passes = (1 + opts.rounds) * len(opts.concurrency)
    total = [len(prompts) * passes * (2 if opts.baseline else 1)]
    sent = [0]

    def done() -> None:
        sent[0] += 1
        emit({"event": "progress", "done": sent[0], "total": total[0]})

    emit({"event": "start", "prompts": len(prompts), "tasks": list(tasks), "port": port})
    emit({"event": "progress", "done": 0, "total": total[0]})
    gpu = _gpu()
    spec: dict[int, Measured] = {}
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
        for level in opts.concurrency:
            emit({"event": "phase", "phase": "speculative", "state": f"concurrency {level}"})
            spec[level] = Measured(*measure(phase, tasks, level, done), phase.version, {})
            if opts.engine == "sglang" and not any(
                r.get("drafts") for r in spec[level].rows.values()
            ):
                raise RunFailure(
                    f"{phase.engine.url}/generate answered no spec_verify_ct in meta_info: the "
                    "engine is not drafting with the checkpoint",
                    hint="check that the engine accepted --speculative-algorithm DFLASH (its log)",
                )
        ran = phase.settings()
        for m in spec.values():
            m.settings = ran
    bases: dict[int, tuple[Measured, dict[str, Any]]] = {}
    if opts.baseline:
        identities = {
            c: baseline_identity(opts, prompts, spec[c], gpu, c) for c in opts.concurrency
        }
        bases = _baselines(opts, identities, tasks, port, emit, done)
        total[0] = sent[0]  # the levels reused sent nothing: the progress is complete
        emit({"event": "progress", "done": sent[0], "total": total[0]})
    levels = {c: (spec[c], bases[c][0] if c in bases else None) for c in opts.concurrency}
    doc = document(opts, prompts, levels, gpu)
    if bases:
        kept = [info for _, info in bases.values()]
        measured_now = any(not info["reused"] for info in kept)
        doc["baseline"] = kept[0] if len(kept) == 1 else {"levels": kept}
        doc["suite"].update(baseline_reused=not measured_now, engine_runs=1 + measured_now)
    part = opts.out.with_name(opts.out.name + ".part")
    part.write_text(json.dumps(doc, indent=1) + "\n")
    part.replace(opts.out)
    return doc


def baseline_identity(
    opts: Options, prompts: list[Prompt], spec: Measured, gpu: tuple[str, int], concurrency: int
) -> dict[str, Any]:
    """What a target-alone run depends on (baselines.py): never the drafter."""
    return {
        "prompts_sha256": prompts_sha256(prompts),
        "target": opts.target,
        "engine": opts.engine,
        "engine_version": spec.version,
        "command": list(opts.command),
        "extra": list(opts.extra),
        "gpu": gpu[0],
        "gpu_count": gpu[1],
        "dtype": spec.settings.get("dtype", opts.dtype),
        "concurrency": concurrency,
        "max_tokens": "continuation",
        "temperature": 0.0,
    }


def _baselines(
    opts: Options,
    identities: dict[int, dict[str, Any]],
    tasks: dict[str, list[Prompt]],
    port: int,
    emit: Emit,
    done: Callable[[], None],
) -> dict[int, tuple[Measured, dict[str, Any]]]:
    """Each level's target-alone run: the host's kept one for its identity (unless
    `fresh_baseline`), else measured now, in one engine for every such level, and kept.
    Returns each with what the results say of it."""
    store = BaselineStore(opts.baseline_store) if opts.baseline_store else None
    out: dict[int, tuple[Measured, dict[str, Any]]] = {}
    for level, identity in identities.items():
        kept = store.load(identity) if store is not None and not opts.fresh_baseline else None
        if store is None or kept is None:
            continue
        m = kept["measured"]
        emit({"event": "phase", "phase": "baseline", "state": f"reused concurrency {level}"})
        base = Measured(m["rows"], m["suite_rounds"], m.get("version"), m.get("settings", {}))
        out[level] = (
            base,
            {
                "reused": True,
                "concurrency": level,
                "measured_at": m.get("measured_at"),
                "job": kept.get("job"),
                "file": str(store.path(identity)),
                "key": digest(identity),
            },
        )
    missing = [c for c in identities if c not in out]
    if not missing:
        return out
    with Phase(opts, "baseline", None, port, emit) as phase:
        measured = {
            c: Measured(*measure(phase, tasks, c, done), phase.version, {}) for c in missing
        }
        ran = phase.settings()
    for level in missing:
        base = measured[level]
        base.settings = ran
        info: dict[str, Any] = {
            "reused": False,
            "concurrency": level,
            "measured_at": time.time(),
            "key": digest(identities[level]),
        }
        if store is not None:
            kept_doc = {
                "rows": base.rows,
                "suite_rounds": base.suite_rounds,
                "version": base.version,
                "settings": base.settings,
                "measured_at": info["measured_at"],
            }
            try:
                info["file"] = str(store.save(identities[level], kept_doc, opts.out.parent.name))
            except OSError as exc:  # the bench stands; only the reuse is lost
                emit({"event": "warning", "message": f"cannot keep the baseline: {exc}"})
        out[level] = base, info
    return out
