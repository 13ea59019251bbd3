"""Attention semantics of stored results, so rankings and series never mix them silently.

A result's ``attention`` object (docs/design.md "The block forward", written by the harness) says what
a drafter's ``sliding_attention`` layers saw inside the block: ``bidirectional``
(the default since the field exists) or ``causal``. A drafter whose own config
makes every layer causal is ``causal-all``. Results without the field were
written by the harness before it had the choice, which made sliding layers
causal: they are read as ``causal`` and marked as assumed.

On a sliding-window drafter the choice moves ``streak_top1`` a lot (1.59 vs
1.14 on one small drafter), so the leaderboard ranks each semantics apart, a
progress series holds one semantics, and tau calibration pairs come from one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

BIDIRECTIONAL = "bidirectional"
CAUSAL = "causal"
CAUSAL_ALL = "causal-all"  # the drafter's config made every layer causal, full ones too
KEYS = (BIDIRECTIONAL, CAUSAL, CAUSAL_ALL)
DEFAULT = BIDIRECTIONAL
LEGACY = CAUSAL  # what the harness computed before results recorded it
ASSUMED_NOTE = "* no attention field (written before it existed): read as sliding causal"


def attention_key(attention: Mapping[str, Any] | None) -> str:
    """The semantics a result was scored under (``LEGACY`` when it does not say)."""
    if not attention:
        return LEGACY
    sliding = attention.get("sliding")
    if attention.get("full") == CAUSAL:
        return CAUSAL_ALL
    return sliding if sliding in (BIDIRECTIONAL, CAUSAL) else LEGACY


def attention_label(attention: Mapping[str, Any] | None) -> str:
    """Short text for tables: the key, with ``*`` when assumed (see ``ASSUMED_NOTE``)."""
    return attention_key(attention) + ("" if attention else "*")


def ordered(keys: Iterable[str]) -> list[str]:
    """Distinct keys, default first, then the rest in ``KEYS`` order."""
    present = set(keys)
    return [k for k in KEYS if k in present] + sorted(present - set(KEYS))


def describe(key: str) -> str:
    """Words for notes: ``sliding layers bidirectional`` and the like."""
    if key == CAUSAL_ALL:
        return "every layer causal (the drafter's config)"
    return f"sliding layers {key}"
