"""Drafter-versus-cache compatibility, checked before any compute.

A drafter trained for one target cannot be scored on hidden states cached from
another; rather than fail deep in a matmul, every mismatch is collected here
and reported in one message.
"""

from __future__ import annotations

from .cache import Manifest, SampleSpec, TargetHead
from .drafter import DrafterFiles
from .errors import Problems


def check_compatibility(
    drafter: DrafterFiles,
    manifest: Manifest,
    head: TargetHead,
    samples: list[SampleSpec],
    problems: Problems,
) -> None:
    """Add one problem per mismatch between the drafter and the cache."""
    cfg = drafter.config
    h = cfg.hidden_size
    if manifest.hidden_size and h != manifest.hidden_size:
        problems.add(
            f"hidden_size: drafter config.json has {h}, cache manifest.json has {manifest.hidden_size}"
        )
    if manifest.target_layer_ids and tuple(cfg.target_layer_ids) != manifest.target_layer_ids:
        problems.add(
            f"target_layer_ids: drafter has {list(cfg.target_layer_ids)}, "
            f"cache has {list(manifest.target_layer_ids)}"
        )
    expected_width = cfg.n_feature_layers * h
    fc_width = drafter.fc_width()
    if fc_width is not None and fc_width != expected_width:
        problems.add(
            f"fc input width: fc.weight takes {fc_width} features, but "
            f"len(target_layer_ids)={cfg.n_feature_layers} x hidden_size={h} = {expected_width}"
        )
    width = fc_width if fc_width is not None else expected_width
    wrong = sorted(
        {s.feature_width for s in samples if s.feature_width and s.feature_width != width}
    )
    if wrong:
        names = [s.name for s in samples if s.feature_width in wrong][:3]
        problems.add(
            f"fc input width: drafter fc takes {width} features per token, cache hidden_states have "
            f"{', '.join(map(str, wrong))} (samples {', '.join(names)})"
        )
    head_rows, head_hidden = head.shapes["lm_head"][:1], head.shapes["lm_head"][1:]
    rows = head.vocab_rows
    if head_hidden and head_hidden[0] != h:
        problems.add(
            f"target head: lm_head is {list(head.shapes['lm_head'])}, drafter hidden_size is {h}"
        )
    if head_rows and cfg.vocab_size is not None and cfg.vocab_size != rows:
        problems.add(
            f"vocab size: drafter vocab_size is {cfg.vocab_size}, target head has {rows} rows"
        )
    if not 0 <= cfg.mask_token_id < rows:
        problems.add(
            f"mask_token_id: drafter uses {cfg.mask_token_id}, the target head has rows 0..{rows - 1}"
        )
    for s in samples:
        if s.input_ids is not None and s.input_ids.numel():
            top, low = int(s.input_ids.max()), int(s.input_ids.min())
            if top >= rows or low < 0:
                problems.add(
                    f"sample {s.name!r}: token ids span {low}..{top}, the target head has {rows} rows"
                )
