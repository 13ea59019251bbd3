"""Each request's own speculative counts, from wherever the engine gives them.

* SGLang answers `/generate` with `meta_info`: `spec_verify_ct` (verify steps),
  `spec_num_correct_drafts` (older: `spec_accepted_drafts`), `spec_num_proposed_drafts`
  (older: `spec_proposed_drafts`), `spec_accept_length` (its own completion_tokens /
  verify steps) and the accepted-length histogram `spec_correct_drafts_histogram`
  (older: `spec_accept_histogram`; index n = verify steps that accepted n drafts).
  SGLang's `/metrics` acceptance is a gauge averaged over the server's life, so a
  difference of it means nothing: its tau comes from these fields only.
* vLLM, started with `--per-request-spec-decode-metrics`, answers with
  `metrics.speculative_decoding` (`num_spec_steps`, `num_accepted_draft_tokens`,
  `num_draft_tokens`, `acceptance_histogram`).
* Otherwise, at concurrency 1, the `/metrics` counters read before and after the
  request are its own (`from_counters`); the histogram follows from the
  per-position counts, since a step accepts position i only if it accepts every
  position before it: steps accepting exactly n = count(n - 1) - count(n).

Each is one `Counts`; `record` turns it into the per-request row of the results.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .client import Counters


@dataclass(frozen=True)
class Counts:
    """One request's verify steps, drafted and accepted tokens, and accepted-length histogram."""

    drafts: int  # verify steps that checked a draft
    draft_tokens: int | None
    accepted: int
    histogram: tuple[int, ...] | None
    source: str  # "meta_info", "response metrics" or "/metrics"
    engine_tau: float | None = None  # the engine's own per-request figure, as it defines it


def _int(meta: Mapping[str, Any], *names: str) -> int | None:
    for name in names:
        value = meta.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return int(value)
    return None


def _hist(meta: Mapping[str, Any], *names: str) -> tuple[int, ...] | None:
    for name in names:
        value = meta.get(name)
        if isinstance(value, list) and all(isinstance(v, (int, float)) for v in value):
            return tuple(int(v) for v in value)
    return None


def from_sglang(meta: Mapping[str, Any]) -> Counts | None:
    """The counts of SGLang's `meta_info` (None: it drafted nothing for this request)."""
    steps = _int(meta, "spec_verify_ct")
    accepted = _int(meta, "spec_num_correct_drafts", "spec_accepted_drafts")
    if not steps or accepted is None:
        return None
    engine_tau = meta.get("spec_accept_length")
    return Counts(
        steps,
        _int(meta, "spec_num_proposed_drafts", "spec_proposed_drafts"),
        accepted,
        _hist(meta, "spec_correct_drafts_histogram", "spec_accept_histogram"),
        "meta_info",
        float(engine_tau) if isinstance(engine_tau, (int, float)) else None,
    )


def from_vllm_response(body: Mapping[str, Any]) -> Counts | None:
    """The counts of vLLM's per-request spec-decode metrics, when the server reports them."""
    metrics = body.get("metrics")
    spec = metrics.get("speculative_decoding") if isinstance(metrics, dict) else None
    if not isinstance(spec, dict):
        return None
    steps = _int(spec, "num_spec_steps")
    accepted = _int(spec, "num_accepted_draft_tokens")
    if not steps or accepted is None:
        return None
    engine_tau = spec.get("mean_acceptance_length")
    return Counts(
        steps,
        _int(spec, "num_draft_tokens"),
        accepted,
        _hist(spec, "acceptance_histogram"),
        "response metrics",
        float(engine_tau) if isinstance(engine_tau, (int, float)) else None,
    )


def from_counters(before: Counters, after: Counters, k: int) -> Counts | None:
    """The counts of the `/metrics` difference around one request (concurrency 1 only)."""
    if before.drafts is None or after.drafts is None or after.accepted is None:
        return None
    steps = int(after.drafts - before.drafts)
    if steps <= 0:
        return None
    accepted = int(after.accepted - (before.accepted or 0.0))
    histogram = None
    if after.per_position:
        reached = [steps] + [
            int(after.per_position.get(i, 0.0) - before.per_position.get(i, 0.0)) for i in range(k)
        ]
        histogram = tuple(reached[n] - (reached[n + 1] if n < k else 0) for n in range(k + 1))
    draft_tokens = None
    if after.draft_tokens is not None:
        draft_tokens = int(after.draft_tokens - (before.draft_tokens or 0.0))
    return Counts(steps, draft_tokens, accepted, histogram, "/metrics")


def record(
    task: str, prompt_tokens: int, output_tokens: int, counts: Counts | None
) -> dict[str, Any]:
    """One row of the per-request table: tau as 1 + accepted / steps (the engine's count,
    past `max_tokens` included) and without the drafts accepted past the end."""
    row: dict[str, Any] = {
        "task": task,
        "prompt_tokens": prompt_tokens,
        "output_tokens": output_tokens,
    }
    if counts is None:
        return row
    past_end = 1 + counts.drafts + counts.accepted - output_tokens
    row |= {
        "drafts": counts.drafts,
        "accepted": counts.accepted,
        "tau": 1.0 + counts.accepted / counts.drafts,
        "past_end": past_end,
        "tau_within_max_tokens": 1.0 + (counts.accepted - past_end) / counts.drafts,
        "source": counts.source,
    }
    if counts.draft_tokens is not None:
        row["draft_tokens"] = counts.draft_tokens
    if counts.histogram is not None:
        row["histogram"] = list(counts.histogram)
    if counts.engine_tau is not None:
        row["engine_tau"] = counts.engine_tau
    return row
