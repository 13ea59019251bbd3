"""sgl-project/SpecForge `benchmarks/bench_eagle3.py`: `results/[NAME_]results_<time>.jsonl`.

Despite the name, one JSON object (`json.dump(results, f, indent=4)`)::

    {"model": "lmsys/sglang-EAGLE3-...",          # the draft model path (newer versions)
     "mtbench": [                                  # one key per benchmark of --benchmark-list
        {"batch_size": 1, "steps": 3, "topk": 1, "num_draft_tokens": 4,
         "metrics": [                              # one per run (asdict of BenchmarkMetrics)
            {"latency": 12.3, "output_throughput": 456.7, "accept_length": 3.21,
             "accuracy": null, "num_questions": 80, "num_valid_predictions": 0,
             "categorical_performance": null}],
         "num_samples": 80}, ...], ...}

one item per `--config-list` entry `batch_size,steps,topk,num_draft_tokens`;
`steps` 0 is the server without speculative decoding (the baseline the speedup is
against, same benchmark and batch size); with `--skip-launch-server` steps, topk
and num_draft_tokens are null (an external server: its settings are unknown).
`accept_length` is SGLang's completion tokens over verify forwards (bonus token
included); several runs are averaged, as the script's `print_results` does.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dflash_tui.evals.results.served.record import ServedEntry, ServedFormatError, ServedReport

FORMAT = "specforge"
WRITER = "sgl-project/SpecForge benchmarks/bench_eagle3.py (results JSON)"


def _json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (UnicodeDecodeError, ValueError):
        return None


def _is_config(item: Any) -> bool:
    return (
        isinstance(item, dict)
        and isinstance(item.get("metrics"), list)
        and all(isinstance(m, dict) and "accept_length" in m for m in item["metrics"])
    )


def detect(data: bytes) -> bool:
    """A JSON object with at least one benchmark list of configs with `accept_length` metrics."""
    if data.lstrip()[:1] != b"{":
        return False
    doc = _json(data)
    return isinstance(doc, dict) and any(
        isinstance(v, list) and v and all(_is_config(c) for c in v) for v in doc.values()
    )


def _mean(metrics: list[Mapping[str, Any]], key: str) -> float | None:
    values = [float(m[key]) for m in metrics if isinstance(m.get(key), (int, float))]
    values = [v for v in values if math.isfinite(v)]  # JSON's NaN/Infinity: no measurement
    mean = sum(values) / len(values) if values else None
    return mean if mean is None or math.isfinite(mean) else None


def _batch(config: Mapping[str, Any]) -> str:
    """A config's batch size as a key (a broken file may hold a list there)."""
    return repr(config.get("batch_size"))


def read(data: bytes, path: Path, *, task: str | None = None) -> ServedReport:
    """One entry per (benchmark, speculative config); steps-0 configs are baselines only."""
    doc = _json(data)
    if not isinstance(doc, dict):
        raise ServedFormatError(path, "not a JSON object (bench_eagle3.py writes one)")
    model = doc.get("model")
    benches = {k: v for k, v in doc.items() if k != "model"}
    entries: list[ServedEntry] = []
    unknown: list[str] = []  # benchmarks run against an external server
    for bench, configs in benches.items():
        if not isinstance(configs, list) or not all(_is_config(c) for c in configs):
            raise ServedFormatError(
                path,
                f"{bench!r}: expected a list of configs, each with 'metrics' whose items have "
                "'accept_length' (bench_eagle3.py's layout)",
            )
        baseline = {
            _batch(c): _mean(c["metrics"], "output_throughput")
            for c in configs
            if c.get("steps") == 0
        }
        for i, config in enumerate(configs):
            if config.get("steps") == 0:
                continue
            metrics = config["metrics"]
            if not metrics:
                raise ServedFormatError(path, f"{bench}[{i}]: 'metrics' is empty")
            throughput = _mean(metrics, "output_throughput")
            base = baseline.get(_batch(config))
            external = config.get("steps") is None
            details: dict[str, Any] = {
                "runs": len(metrics),
                "latency_s": _mean(metrics, "latency"),
                "num_questions": metrics[0].get("num_questions"),
            }
            accuracy = _mean(metrics, "accuracy")
            if accuracy is not None:
                details["accuracy"] = accuracy
            if config.get("num_samples") is not None:
                details["num_samples"] = config["num_samples"]
            entries.append(
                ServedEntry(
                    task=bench,
                    method="external server" if external else "eagle3",
                    tau=_mean(metrics, "accept_length"),
                    throughput_tok_s=throughput,
                    speedup=throughput / base if throughput and base else None,
                    baseline_tok_s=base,
                    settings={
                        "batch_size": config.get("batch_size"),
                        "steps": config.get("steps"),
                        "topk": config.get("topk"),
                        "num_draft_tokens": config.get("num_draft_tokens"),
                    },
                    details=details,
                )
            )
            if external:
                unknown.append(bench)
    if not entries:
        raise ServedFormatError(
            path, "no speculative config in it (only steps-0 baselines, or no benchmark at all)"
        )
    notes: tuple[str, ...] = ()
    if unknown:
        names = ", ".join(dict.fromkeys(unknown))
        notes = (
            f"{names}: run with --skip-launch-server: the server's speculative settings "
            "are not in the file",
        )
    return ServedReport(
        FORMAT,
        WRITER,
        tuple(entries),
        draft=model if isinstance(model, str) else None,
        notes=notes,
    )
