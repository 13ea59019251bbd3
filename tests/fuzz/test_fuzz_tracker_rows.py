"""Fuzz what the trackio and W&B readers parse: a trackio row (its metrics JSON as
trackio stores it, speculators' names) and a W&B summary file, each with odd values
swapped in (huge integers, NaN, strings, lists, nesting), as the host's script
frames them.

A row or a summary of valid JSON is read: scalars for its numbers, nothing for
the rest, never an exception. An exception there would make the follower
reconnect and read the same row again, for ever.
"""

from __future__ import annotations

import base64
import json
import math

from hypothesis import given
from hypothesis import strategies as st

from dflash_tui.monitor.trackers.trackio import TrackioTail
from dflash_tui.monitor.trackers.wandb import WandbTail
from tests.fuzz.bounds import FUZZ, within_bounds
from tests.fuzz.mutate import mutated

# speculators' trackio row (src/speculators/train/logger.py logs nested dicts)
ROW = {"train": {"loss": 1.5, "full_acc": 0.5, "eal": 2.5, "lr": 1e-4}, "train/position_0_acc": 0.9}
# a wandb-summary.json as wandb writes it
SUMMARY = {"_step": 40, "_runtime": 12.5, "_timestamp": 1.7e9, "train/loss": 1.2, "eval/eal": 3.1}
HUGE = st.sampled_from([10**400, -(10**400), 2**63, "NaN", "Infinity", "-Infinity"])


def _odd(doc: dict[str, object]) -> st.SearchStrategy[object]:
    """`doc` mutated, or with a value past a double's range where the reader looks."""
    huge = st.fixed_dictionaries({"train": st.fixed_dictionaries({"loss": HUGE})})
    if "_step" in doc:
        huge = st.fixed_dictionaries({"_step": st.integers(0, 10), "train/loss": HUGE})
    return mutated(doc, extra_keys=("train/eal", "val/eal_epoch", "x")) | huge


def _scalars_are_numbers(tail: TrackioTail | WandbTail) -> None:
    for scalar in tail._scalars:
        assert isinstance(scalar.value, float)
        assert isinstance(scalar.name, str)


@given(metrics=_odd(ROW), step=st.integers(0, 2**62))
@FUZZ
def test_a_trackio_row_with_odd_values_is_read(metrics: object, step: int) -> None:
    tail = TrackioTail(None, "a", "runs.db", "run")  # type: ignore[arg-type]  # never connects
    text = json.dumps(metrics, allow_nan=True)
    line = f"R 1 {step} 2026-12-04T10:00:00.000000 {text}".encode()
    within_bounds(lambda: tail.line(line))
    assert tail.position == 1 and tail.records + tail.corrupt == 1
    _scalars_are_numbers(tail)


@given(summary=_odd(SUMMARY))
@FUZZ
def test_a_wandb_summary_with_odd_values_is_read(summary: object) -> None:
    tail = WandbTail(None, "a", "wandb/offline-run-1")  # type: ignore[arg-type]  # never connects
    line = b"J " + base64.b64encode(json.dumps(summary, allow_nan=True).encode())
    within_bounds(lambda: tail.line(line))
    _scalars_are_numbers(tail)
    for scalar in tail._scalars:
        assert not math.isnan(scalar.value) or "NaN" in json.dumps(summary, allow_nan=True)
