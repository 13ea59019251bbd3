"""Drafter-versus-cache compatibility, checked before any compute.

A drafter trained for one target cannot be scored on hidden states cached from
another; rather than fail deep in a matmul, every mismatch is collected here
and reported in one message. The rules are `rules.cache_problems`, the same
the console's eval preflight applies before copying anything; only the token
ids, which need the sample tensors, are checked here alone.
"""

from __future__ import annotations

from .cache import Manifest, SampleSpec, TargetHead
from .drafter import DrafterFiles
from .errors import Problems
from .rules import CacheFacts, cache_problems


def check_compatibility(
    drafter: DrafterFiles,
    manifest: Manifest,
    head: TargetHead,
    samples: list[SampleSpec],
    problems: Problems,
) -> None:
    """Add one problem per mismatch between the drafter and the cache."""
    lm_head = head.shapes["lm_head"]
    facts = CacheFacts(
        where="cache manifest.json",
        hidden_size=manifest.hidden_size or None,
        target_layer_ids=manifest.target_layer_ids or None,
        feature_widths={s.name: s.feature_width for s in samples if s.feature_width},
        head_rows=head.vocab_rows if lm_head[:1] else None,
        head_hidden=lm_head[1] if len(lm_head) > 1 else None,
    )
    cache_problems(drafter.config, drafter.fc_width(), facts, problems)
    rows = head.vocab_rows
    for s in samples:
        if s.input_ids is not None and s.input_ids.numel():
            top, low = int(s.input_ids.max()), int(s.input_ids.min())
            if top >= rows or low < 0:
                problems.add(
                    f"sample {s.name!r}: token ids span {low}..{top}, the target head has {rows} rows"
                )
