"""Drafter config fields this harness cannot score right, one line per field.

The forward of docs/design.md "The block forward" is the DFlash 1 block forward of a Qwen3-style
drafter with plain RoPE. A config that asks for more (DFlash 2's convolutions
and candidate selector, attention biases, scaled RoPE, attention sinks, an
architecture the harness does not know) would still produce numbers, just
wrong ones; it is refused instead, each field named. Standard library only,
so the console's ``inspect`` can ask the same question without torch.
"""

from __future__ import annotations

from typing import Any

KNOWN_MODEL_TYPES = ("qwen3",)  # z-lab's DFlash drafters are Qwen3 decoder layers
DFLASH2_FIELDS = {
    "conv_kernel_size": "dynamic causal convolutions around attention and MLP",
    "conv_group_size": "dynamic causal convolutions around attention and MLP",
    "selector_rank": "the candidate selector that re-ranks each position's top-k",
    "selector_top_k": "the candidate selector that re-ranks each position's top-k",
}
_PLAIN_ROPE = (None, "default")


def _nested(raw: dict[str, Any]) -> dict[str, Any]:
    nested = raw.get("dflash_config")
    return nested if isinstance(nested, dict) else {}


def _where(raw: dict[str, Any], name: str) -> tuple[str, Any] | None:
    """(key as written, value) of a field under dflash_config or at the top level."""
    nested = _nested(raw)
    if nested.get(name) is not None:
        return f"dflash_config.{name}", nested[name]
    if raw.get(name) is not None:
        return name, raw[name]
    return None


def unsupported_fields(raw: dict[str, Any]) -> list[str]:
    """One line per config field the harness would score wrongly (empty: nothing refused)."""
    out: list[str] = []
    arch = raw.get("architectures")
    if isinstance(arch, list) and any(isinstance(a, str) and "DFlash2" in a for a in arch):
        out.append(
            f"architectures: {arch!r} is a DFlash 2 drafter; this harness scores DFlash 1 "
            "drafters only (no convolutions, no candidate selector)"
        )
    for name, what in DFLASH2_FIELDS.items():
        found = _where(raw, name)
        if found is not None:
            out.append(
                f"{found[0]}: a DFlash 2 field ({what}), not part of the forward scored here"
            )
    bias = raw.get("attention_bias")
    if bias is not None and bias is not False:
        out.append(
            f"attention_bias: {bias!r}: attention projections with biases are not scored "
            "(the DFlash forward here has none)"
        )
    scaling = raw.get("rope_scaling")
    if scaling is not None and not (
        isinstance(scaling, dict)
        and scaling.get("rope_type", scaling.get("type")) in _PLAIN_ROPE
        and not {"factor", "original_max_position_embeddings"} & set(scaling)
    ):
        out.append(
            f"rope_scaling: {scaling!r}: scaled RoPE is not implemented (plain RoPE with "
            "rope_theta only)"
        )
    params = raw.get("rope_parameters")
    if isinstance(params, dict) and params.get("rope_type", params.get("type")) not in _PLAIN_ROPE:
        out.append(
            f"rope_parameters.rope_type: {params.get('rope_type', params.get('type'))!r}: "
            "only plain RoPE (rope_type 'default') is implemented"
        )
    model_type = raw.get("model_type")
    if model_type is not None and model_type not in KNOWN_MODEL_TYPES:
        out.append(
            f"model_type: {model_type!r} is not a drafter architecture this harness knows "
            f"({', '.join(KNOWN_MODEL_TYPES)}); its layers may differ from the Qwen3 forward"
        )
    for name in ("attention_sink_bias", "add_swa_attention_sink_bias"):
        found = _where(raw, name)
        if found is not None and found[1] is not False:
            out.append(f"{found[0]}: {found[1]!r}: attention sinks are not implemented")
    found = _where(raw, "use_swa")
    if found is not None and found[1] is not False:
        out.append(
            f"{found[0]}: {found[1]!r}: vLLM's sliding-window switch is not implemented; "
            "state the layers in layer_types and the window in sliding_window"
        )
    found = _where(raw, "swa_window_size")
    if found is not None:
        out.append(f"{found[0]}: not read here; give the window as sliding_window")
    if raw.get("is_neox_style") is False:
        out.append("is_neox_style: false: interleaved RoPE is not implemented (rotate-half only)")
    return out
