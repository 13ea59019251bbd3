"""vllm-project/vllm `vllm bench serve --save-result`: one JSON object per run.

`main` writes (json.dump) the run's setup, then the benchmark's result merged in::

    {"date": "20260101-120000", "endpoint_type": "vllm", "backend": "vllm",
     "label": null, "model_id": "Qwen/Qwen3-8B", "tokenizer_id": "Qwen/Qwen3-8B",
     "num_prompts": 80, "request_rate": "inf", "burstiness": 1.0,
     "max_concurrency": 1,
     "duration": 41.2, "completed": 80, "failed": 0, "total_input_tokens": ...,
     "total_output_tokens": ..., "request_throughput": ..., "output_throughput": ...,
     "total_token_throughput": ..., "mean_ttft_ms": ..., ...,
     "spec_decode_acceptance_rate": 71.3,             # percent of draft tokens
     "spec_decode_acceptance_length": 4.12,           # 1 + accepted / drafts
     "spec_decode_num_drafts": 1234, "spec_decode_draft_tokens": 8638,
     "spec_decode_accepted_tokens": 3850,
     "spec_decode_per_position_acceptance_rates": [0.9, 0.8, ...]}

The `spec_decode_*` keys come from the server's `/metrics` before and after the
run and are there only when the server drafts. The file names no dataset: the
task is `--task`, else the file's name. It holds no baseline, so no speedup.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dflash_tui.evals.results.served.record import ServedEntry, ServedFormatError, ServedReport

FORMAT = "vllm-bench"
WRITER = "vllm-project/vllm `vllm bench serve --save-result` (result JSON)"
_REQUIRED = ("model_id", "num_prompts", "duration", "completed", "output_throughput")


def _doc(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (UnicodeDecodeError, ValueError):
        return None


def detect(data: bytes) -> bool:
    if data.lstrip()[:1] != b"{" or b'"output_throughput"' not in data:
        return False
    doc = _doc(data)
    return isinstance(doc, dict) and all(k in doc for k in _REQUIRED)


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def read(data: bytes, path: Path, *, task: str | None = None) -> ServedReport:
    doc = _doc(data)
    if not isinstance(doc, dict) or not all(k in doc for k in _REQUIRED):
        raise ServedFormatError(
            path, f"not a `vllm bench serve` result (it has {', '.join(_REQUIRED)})"
        )
    notes = []
    name = task or Path(path).stem
    if task is None:
        notes.append(f"the file names no dataset: its task is the file's name {name!r} (--task)")
    tau = _num(doc.get("spec_decode_acceptance_length"))
    if tau is None:
        notes.append("no spec_decode_* fields: the server was not drafting (a baseline run)")
    details = {
        key: doc[src]
        for key, src in (
            ("drafts", "spec_decode_num_drafts"),
            ("draft_tokens", "spec_decode_draft_tokens"),
            ("accepted", "spec_decode_accepted_tokens"),
            ("acceptance_rate_pct", "spec_decode_acceptance_rate"),
            ("per_position", "spec_decode_per_position_acceptance_rates"),
            ("completed", "completed"),
            ("failed", "failed"),
            ("output_tokens", "total_output_tokens"),
            ("duration_s", "duration"),
            ("date", "date"),
        )
        if doc.get(src) is not None
    }
    entry = ServedEntry(
        task=name,
        method=str(doc.get("backend") or doc.get("endpoint_type") or "vllm"),
        tau=tau,
        throughput_tok_s=_num(doc.get("output_throughput")),
        settings={
            "concurrency": doc.get("max_concurrency"),
            "request_rate": doc.get("request_rate"),
            "num_prompts": doc.get("num_prompts"),
        },
        details=details,
    )
    model = doc.get("model_id")
    return ServedReport(
        FORMAT,
        WRITER,
        (entry,),
        model=model if isinstance(model, str) else None,
        notes=tuple(notes),
    )
