"""`dflash-eval/1` validation: is this `eval_results.json` fit for the leaderboard, and if not, why.

The console reads results files written by its own harness and by other
harnesses (`[[suites]] import = [...]`), so nothing is trusted: every key,
type and range is checked and all problems are reported together, each
naming the key (`metrics.tau_top1: expected a number, got a string`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

SCHEMA = "dflash-eval/1"
REQUIRED_METRICS = ("acc", "streak_top1", "tau_top1")
METRIC_NAME = re.compile(
    r"^(acc|acc_per_position|tau_top1|streak_top[1-9]\d*|ddtree_b[1-9]\d*"
    r"|tau_greedy|tau_greedy_ddtree_b[1-9]\d*)$"
)
METRIC_HELP = (
    "acc, acc_per_position, tau_top1, streak_topK, ddtree_bN, tau_greedy, tau_greedy_ddtree_bN"
)
# per-task counts beside the means: anchors scored, greedy decoding blocks and generated tokens
TASK_COUNTS = ("n_anchors", "n_blocks", "n_generated")
# `greedy.labels` (docs/evals.md "Metrics"): the target's own greedy continuation (tau_greedy is exact),
# or labels not known to be (a SpecForge or speculators cache: dataset responses)
GREEDY_LABELS = ("target_greedy", "cache")
MAX_RESULTS_BYTES = 16 * 1024 * 1024
TAU_TOLERANCE = 1e-3


class SchemaError(ValueError):
    """The file is not valid `dflash-eval/1`; `reasons` lists every problem found."""

    def __init__(self, where: str, reasons: list[str]) -> None:
        self.where = where
        self.reasons = reasons
        super().__init__(f"{where}: " + "; ".join(reasons))


@dataclass(frozen=True)
class EvalResults:
    """A validated results file; `raw` is the parsed document as it was."""

    suite: str
    checkpoint_name: str
    checkpoint_path: str | None
    config_sha256: str | None
    block_size: int
    n_anchors: int
    device: str | None
    elapsed_s: float | None
    metrics: Mapping[str, Any]
    tasks: Mapping[str, Mapping[str, Any]]
    raw: Mapping[str, Any] = field(repr=False)
    attention: Mapping[str, Any] | None = (
        None  # None: written before the field (evals/results/semantics.py)
    )
    greedy: Mapping[str, Any] | None = None  # None: written before tau_greedy existed
    protocol: Mapping[str, Any] | None = None  # the cache's (docs/evals.md "The protocol")


def _is_number(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _describe(value: Any) -> str:
    names = {bool: "a boolean", str: "a string", list: "an array", dict: "an object"}
    if value is None:
        return "null"
    if _is_number(value):
        return f"the number {value!r}"
    return names.get(type(value), type(value).__name__)


def _check_metrics(
    table: Mapping[str, Any], where: str, block_size: int | None, reasons: list[str], *, task: bool
) -> None:
    """Names, types and ranges of a metrics table (suite level or one task)."""
    positions = block_size - 1 if block_size else None
    for name, value in table.items():
        key = f"{where}.{name}"
        if task and name in TASK_COUNTS:
            if not _is_count(value):
                reasons.append(f"{key}: expected a count (integer >= 0), got {_describe(value)}")
            continue
        if not METRIC_NAME.match(name):
            reasons.append(f"{key}: unknown metric (known: {METRIC_HELP})")
            continue
        if task and value is None:  # a task with no anchors has no means
            continue
        if name == "acc_per_position":
            if not isinstance(value, list) or not all(_is_number(v) for v in value):
                reasons.append(f"{key}: expected an array of numbers, got {_describe(value)}")
                continue
            if positions is not None and len(value) != positions:
                reasons.append(
                    f"{key}: has {len(value)} values; block_size {block_size} needs {positions}"
                )
            if any(not (math.isfinite(v) and 0.0 <= v <= 1.0) for v in value):
                reasons.append(f"{key}: every value must be an accuracy in [0, 1]")
            continue
        if not _is_number(value) or not math.isfinite(value):
            reasons.append(f"{key}: expected a finite number, got {_describe(value)}")
            continue
        if name == "acc" and not 0.0 <= value <= 1.0:
            reasons.append(f"{key}: {value} is not an accuracy in [0, 1]")
        elif name.startswith(("streak_top", "ddtree_b")) and (
            value < 0 or (positions is not None and value > positions)
        ):
            reasons.append(f"{key}: {value} is outside [0, {positions}] (block_size - 1)")
        elif name.startswith("tau_") and (
            value < 1 or (positions is not None and value > positions + 1)
        ):
            reasons.append(f"{key}: {value} is outside [1, {block_size}] (block_size)")
    if not task:
        for name in REQUIRED_METRICS:
            if name not in table:
                reasons.append(f"{where}.{name}: missing (required: {', '.join(REQUIRED_METRICS)})")
    streak, tau = table.get("streak_top1"), table.get("tau_top1")
    if _is_number(streak) and _is_number(tau) and abs(tau - (streak + 1)) > TAU_TOLERANCE:
        reasons.append(f"{where}.tau_top1: {tau} is not streak_top1 + 1 ({streak} + 1)")
    blocks, generated, greedy = (
        table.get("n_blocks"),
        table.get("n_generated"),
        table.get("tau_greedy"),
    )
    if _is_count(blocks) and _is_count(generated) and blocks and _is_number(greedy):
        _check_ratio(f"{where}.tau_greedy", greedy, generated, blocks, reasons)


def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_ratio(key: str, tau: float, generated: int, blocks: int, reasons: list[str]) -> None:
    if abs(tau - generated / blocks) > TAU_TOLERANCE:
        reasons.append(f"{key}: {tau} is not n_generated / n_blocks ({generated} / {blocks})")


def _check_greedy(value: Any, metrics: Mapping[str, Any], reasons: list[str]) -> None:
    """`greedy`: how tau_greedy was walked (labels, blocks, generated tokens); optional."""
    if not isinstance(value, dict):
        reasons.append(f"greedy: expected an object, got {_describe(value)}")
        return
    labels = value.get("labels")
    if labels not in GREEDY_LABELS:
        reasons.append(
            f"greedy.labels: expected one of {', '.join(GREEDY_LABELS)}, got {_describe(labels)}"
        )
    for key in ("n_runs", "n_blocks", "n_generated", "walk_only_anchors"):
        if key in value and not _is_count(value[key]):
            reasons.append(
                f"greedy.{key}: expected a count (integer >= 0), got {_describe(value[key])}"
            )
    blocks = value.get("ddtree_blocks", {})
    if not isinstance(blocks, dict) or not all(_is_count(v) for v in blocks.values()):
        reasons.append(
            f"greedy.ddtree_blocks: expected an object of counts, got {_describe(blocks)}"
        )
        blocks = {}
    generated = value.get("n_generated")
    if not _is_count(generated):
        return
    tables = [("tau_greedy", value.get("n_blocks"))]
    tables += [(f"tau_greedy_ddtree_{b}", n) for b, n in blocks.items()]
    for name, n in tables:
        tau = metrics.get(name)
        if _is_count(n) and n and _is_number(tau):
            _check_ratio(f"metrics.{name}", tau, generated, n, reasons)


ATTENTION_MODES = ("bidirectional", "causal")


def _check_attention(value: Any, reasons: list[str]) -> None:
    """`attention`: an object with `sliding` (and optionally `full`) naming a semantics."""
    if not isinstance(value, dict):
        reasons.append(f"attention: expected an object, got {_describe(value)}")
        return
    for key in ("sliding", "full"):
        mode = value.get(key)
        if key == "full" and mode is None:
            continue
        if mode not in ATTENTION_MODES:
            reasons.append(
                f"attention.{key}: expected one of {', '.join(ATTENTION_MODES)}, got {_describe(mode)}"
            )


def validate_results(doc: Any, where: str = "eval_results.json") -> EvalResults:
    """Check a parsed document against `dflash-eval/1`; raises SchemaError listing every problem."""
    if not isinstance(doc, dict):
        raise SchemaError(where, [f"expected a JSON object, got {_describe(doc)}"])
    reasons: list[str] = []
    schema = doc.get("schema")
    if schema != SCHEMA:
        got = "missing" if schema is None else repr(schema)
        reasons.append(f'schema: expected "{SCHEMA}", got {got}')
    suite = doc.get("suite")
    if not isinstance(suite, str) or not suite.strip():
        reasons.append(f"suite: expected a non-empty string, got {_describe(suite)}")
    ckpt = doc.get("checkpoint")
    name = path = config_sha = None
    if not isinstance(ckpt, dict):
        reasons.append(f"checkpoint: expected an object with a name, got {_describe(ckpt)}")
    else:
        name = ckpt.get("name")
        if not isinstance(name, str) or not name.strip():
            reasons.append(f"checkpoint.name: expected a non-empty string, got {_describe(name)}")
        path = ckpt.get("path")
        if path is not None and not isinstance(path, str):
            reasons.append(f"checkpoint.path: expected a string, got {_describe(path)}")
        config_sha = ckpt.get("config_sha256")
        if config_sha is not None and not isinstance(config_sha, str):
            reasons.append(
                f"checkpoint.config_sha256: expected a string, got {_describe(config_sha)}"
            )
    block_size = doc.get("block_size")
    if not isinstance(block_size, int) or isinstance(block_size, bool) or block_size < 2:
        reasons.append(f"block_size: expected an integer >= 2, got {_describe(block_size)}")
        block_size = None
    n_anchors = doc.get("n_anchors")
    if not isinstance(n_anchors, int) or isinstance(n_anchors, bool) or n_anchors < 1:
        reasons.append(f"n_anchors: expected an integer >= 1, got {_describe(n_anchors)}")
    device = doc.get("device")
    if device is not None and not isinstance(device, str):
        reasons.append(f"device: expected a string, got {_describe(device)}")
    elapsed = doc.get("elapsed_s")
    if elapsed is not None and not (_is_number(elapsed) and elapsed >= 0):
        reasons.append(f"elapsed_s: expected a number >= 0, got {_describe(elapsed)}")
    attention = doc.get("attention")
    if attention is not None:
        _check_attention(attention, reasons)
    metrics = doc.get("metrics")
    if not isinstance(metrics, dict):
        reasons.append(f"metrics: expected an object, got {_describe(metrics)}")
        metrics = {}
    else:
        _check_metrics(metrics, "metrics", block_size, reasons, task=False)
    greedy = doc.get("greedy")
    if greedy is not None:
        _check_greedy(greedy, metrics, reasons)
    protocol = doc.get("protocol")
    if protocol is not None and not isinstance(protocol, dict):
        reasons.append(f"protocol: expected an object, got {_describe(protocol)}")
    tasks = doc.get("tasks", {})
    if not isinstance(tasks, dict):
        reasons.append(f"tasks: expected an object (task name -> metrics), got {_describe(tasks)}")
        tasks = {}
    else:
        for task, table in tasks.items():
            if not isinstance(table, dict):
                reasons.append(f"tasks.{task}: expected an object, got {_describe(table)}")
                continue
            _check_metrics(table, f"tasks.{task}", block_size, reasons, task=True)
    if reasons:
        raise SchemaError(where, reasons)
    assert isinstance(suite, str) and isinstance(name, str) and block_size is not None
    return EvalResults(
        suite=suite,
        checkpoint_name=name,
        checkpoint_path=path,
        config_sha256=config_sha,
        block_size=block_size,
        n_anchors=int(n_anchors),  # type: ignore[arg-type]  # checked a count above
        device=device,
        elapsed_s=float(elapsed) if elapsed is not None else None,
        metrics=metrics,
        tasks=tasks,
        raw=doc,
        attention=attention,
        greedy=greedy if isinstance(greedy, dict) else None,
        protocol=protocol if isinstance(protocol, dict) else None,
    )


def parse_results(data: bytes, where: str = "eval_results.json") -> EvalResults:
    """Decode and validate a results file's bytes; raises SchemaError (also for bad JSON)."""
    if len(data) > MAX_RESULTS_BYTES:
        raise SchemaError(where, [f"{len(data)} bytes is too large for a results file"])
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise SchemaError(where, ["not UTF-8 text"]) from None
    except json.JSONDecodeError as exc:
        raise SchemaError(where, [f"not JSON: {exc.msg} at line {exc.lineno}"]) from None
    return validate_results(doc, where)
