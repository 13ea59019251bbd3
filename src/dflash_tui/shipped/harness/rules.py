"""The rules a drafter must meet to be scored: one list, three callers (docs/design.md "Drafter checkpoint" and "The block forward").

The harness checks them before any compute; ``dflash-tui inspect`` checks a
checkpoint's config against its tensor shapes with them; the console's eval
preflight checks a drafter against a suite's cache with them before anything is
copied. One list means a drafter the harness would refuse after a 3 GB copy is
refused in seconds, in the same words. Everything here reads parsed JSON and
safetensors header shapes only, so it is standard library: the console has no
torch, and the harness ships this file to GPU hosts.

z-lab checkpoints keep some fields (``mask_token_id``, ``target_layer_ids``,
often ``block_size``) under ``dflash_config`` and the rest at the top level; a
field is looked up in ``dflash_config`` first, then at the top level, the way
the reference model reads it. ``num_target_layers`` is the target's depth; the
number of feature layers is ``len(target_layer_ids)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .attention import config_causality
from .errors import InputError, Problems
from .refusals import unsupported_fields

FLOAT_WEIGHTS = ("F32", "F16", "BF16")
# where a target model keeps its embeddings and head, and the names in a cache's head file
EMBED_NAMES = (
    "model.embed_tokens.weight",
    "model.language_model.embed_tokens.weight",
    "language_model.model.embed_tokens.weight",
    "embed_tokens.weight",
)
LM_HEAD_NAMES = ("lm_head.weight", "language_model.lm_head.weight", "model.lm_head.weight")
HEAD_FILE_NAMES = {
    "embed": ("embed_tokens", "embed_tokens.weight"),
    "lm_head": ("lm_head", "lm_head.weight"),
}
# tensor name -> (safetensors dtype, shape), as read from a header
Shapes = Mapping[str, tuple[str, tuple[int, ...]]]

FULL = "full_attention"
SLIDING = "sliding_attention"
# Config classes whose use_sliding_window defaults to false and that drop sliding_window
# unless it is true (transformers' Qwen2Config, Qwen3Config): a drafter config of these
# model types without the key runs no window in z-lab's model, whatever its layer_types say.
WINDOW_DEFAULT_OFF = ("qwen2", "qwen3")


@dataclass(frozen=True)
class DrafterConfig:
    """The fields of config.json the forward pass needs, validated."""

    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    vocab_size: int | None
    block_size: int
    mask_token_id: int
    target_layer_ids: tuple[int, ...]
    layer_types: tuple[str, ...]
    sliding_window: int | None
    num_target_layers: int | None = None
    input_embedding_scale: float | None = None
    output_multiplier: float | None = None
    final_logit_softcapping: float | None = None
    causal: bool | None = None  # the config's own causality (is_causal / dflash_config.causal)
    causal_key: str | None = None  # the key it came from
    # sliding_attention layers that attend as full_attention ones: use_sliding_window is not true
    windowless_layers: int = 0

    @property
    def n_feature_layers(self) -> int:
        return len(self.target_layer_ids)


def _lookup(raw: dict[str, Any], name: str) -> Any:
    nested = raw.get("dflash_config")
    if isinstance(nested, dict) and nested.get(name) is not None:
        return nested[name]
    return raw.get(name)


MAX_LAYERS = 1024
"""More layers than any model has: a config saying so is broken, not big."""


def _int(raw: dict[str, Any], name: str, problems: Problems, default: int | None = None) -> int:
    value = _lookup(raw, name)
    if value is None:
        if default is not None:
            return default
        problems.add(f"{name}: missing (looked at the top level and under dflash_config)")
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        problems.add(f"{name}: expected an integer, found {value!r}")
        return 0
    return value


def _float(
    raw: dict[str, Any], name: str, problems: Problems, default: float | None
) -> float | None:
    value = _lookup(raw, name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        problems.add(f"{name}: expected a number, found {value!r}")
        return default
    return float(value)


def _rope_theta(raw: dict[str, Any], problems: Problems) -> float:
    """rope_theta at the top level, under dflash_config, or in rope_parameters (newer configs)."""
    params = raw.get("rope_parameters") or raw.get("rope_scaling")  # types: refusals.py
    theta = _float(raw, "rope_theta", problems, None)
    if theta is None and isinstance(params, dict) and params.get("rope_theta") is not None:
        theta = float(params["rope_theta"])
    factor = _float(raw, "partial_rotary_factor", problems, 1.0)
    if factor != 1.0:
        problems.add(f"partial_rotary_factor {factor}: only full rotary embeddings are supported")
    return 10000.0 if theta is None else theta  # transformers' Qwen3Config default


def parse_config(raw: dict[str, Any], source: str) -> DrafterConfig:
    """Validate a parsed config.json; InputError lists every missing or malformed field."""
    p = Problems()
    refused = unsupported_fields(raw)
    for line in refused:
        p.add(
            line,
            "this harness scores DFlash 1 Qwen3-style drafters with plain RoPE (docs/design.md 'The block forward')",
        )
    causal, causal_key, causal_problems = config_causality(raw)
    for line in causal_problems:
        p.add(line)
    hidden = _int(raw, "hidden_size", p)
    heads = _int(raw, "num_attention_heads", p)
    kv_heads = _int(raw, "num_key_value_heads", p, default=heads or None)
    head_dim = _int(raw, "head_dim", p, default=(hidden // heads) if heads else None)
    layers = _int(raw, "num_hidden_layers", p)
    if not 0 <= layers <= MAX_LAYERS:
        # every per-layer list below has this many entries: 10**12 would never finish
        p.add(f"num_hidden_layers: {layers} is not a drafter's (expected 0 to {MAX_LAYERS})")
        layers = 0
    layer_ids = _lookup(raw, "target_layer_ids")
    if layer_ids is None:
        p.add("target_layer_ids: missing (expected under dflash_config or at the top level)")
        layer_ids = []
    elif not isinstance(layer_ids, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in layer_ids
    ):
        p.add(f"target_layer_ids: expected a list of integers, found {layer_ids!r}")
        layer_ids = []
    elif not layer_ids:
        p.add("target_layer_ids: empty")
    types = _lookup(raw, "layer_types")
    if types is None:
        # Qwen2/3 convention: sliding layers from max_window_layers on, when enabled.
        start = _lookup(raw, "max_window_layers")
        use = bool(_lookup(raw, "use_sliding_window")) and _lookup(raw, "sliding_window")
        start = start if isinstance(start, int) else layers
        types = [SLIDING if use and i >= start else FULL for i in range(layers)]
    if not isinstance(types, list) or any(t not in (FULL, SLIDING) for t in types):
        p.add(f"layer_types: expected a list of {FULL!r} / {SLIDING!r}, found {types!r}")
        types = [FULL] * layers
    elif len(types) != layers:
        p.add(f"layer_types: {len(types)} entries for num_hidden_layers {layers}")
    use_window = _lookup(raw, "use_sliding_window")
    if use_window is not None and not isinstance(use_window, bool):
        p.add(f"use_sliding_window: expected true or false, found {use_window!r}")
    if use_window is None and raw.get("model_type") in WINDOW_DEFAULT_OFF:
        use_window = False  # the config class's default: no key is no window (as z-lab runs it)
    windowless = 0
    if use_window is False and SLIDING in types:
        # transformers' Qwen3Config keeps sliding_window only when use_sliding_window is
        # true, so z-lab's model runs these layers with full attention (docs/design.md "The block forward")
        windowless = types.count(SLIDING)
        types = [FULL] * len(types)
    window = _lookup(raw, "sliding_window")
    if SLIDING in types and (not isinstance(window, int) or isinstance(window, bool) or window < 1):
        p.add(f"sliding_window: sliding_attention layers need a positive integer, found {window!r}")
        window = None
    vocab = _lookup(raw, "vocab_size")
    if vocab is not None and (not isinstance(vocab, int) or isinstance(vocab, bool) or vocab < 1):
        p.add(f"vocab_size: expected a positive integer, found {vocab!r}")
        vocab = None
    mask_id = _int(raw, "mask_token_id", p)
    block = _int(raw, "block_size", p, default=16)
    if block < 2:
        p.add(f"block_size: must be at least 2, found {block}")
    for name, value in (
        ("hidden_size", hidden),
        ("num_attention_heads", heads),
        ("num_hidden_layers", layers),
    ):
        if value is not None and value < 0:
            p.add(f"{name}: must be positive, found {value}")
    if heads and kv_heads and heads % kv_heads:
        p.add(f"num_attention_heads {heads} is not a multiple of num_key_value_heads {kv_heads}")
    if head_dim and head_dim % 2:
        p.add(f"head_dim {head_dim} must be even for rotary embeddings")
    cfg = DrafterConfig(
        hidden_size=hidden,
        intermediate_size=_int(raw, "intermediate_size", p),
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        rms_norm_eps=_float(raw, "rms_norm_eps", p, 1e-6) or 1e-6,
        rope_theta=_rope_theta(raw, p),
        vocab_size=vocab,
        block_size=block,
        mask_token_id=mask_id,
        target_layer_ids=tuple(layer_ids),
        layer_types=tuple(types),
        sliding_window=window if SLIDING in types else None,
        num_target_layers=_lookup(raw, "num_target_layers"),
        input_embedding_scale=_float(raw, "input_embedding_scale", p, None),
        output_multiplier=_float(raw, "output_multiplier", p, None),
        final_logit_softcapping=_float(raw, "final_logit_softcapping", p, None),
        causal=causal,
        causal_key=causal_key,
        windowless_layers=windowless,
    )
    p.raise_if_any(
        f"drafter config {source} is not a usable DFlash drafter config:",
        hint="compare it with the z-lab config.json of the same model family (docs/design.md 'Drafter checkpoint')",
    )
    return cfg


def weight_shapes(cfg: DrafterConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor the forward pass reads, with the shape the config implies."""
    h, d = cfg.hidden_size, cfg.head_dim
    q_out, kv_out, inter = cfg.num_heads * d, cfg.num_kv_heads * d, cfg.intermediate_size
    shapes: dict[str, tuple[int, ...]] = {}
    for i in range(cfg.num_layers):
        a, m = f"layers.{i}.self_attn", f"layers.{i}.mlp"
        shapes.update(
            {
                f"{a}.q_proj.weight": (q_out, h),
                f"{a}.k_proj.weight": (kv_out, h),
                f"{a}.v_proj.weight": (kv_out, h),
                f"{a}.o_proj.weight": (h, q_out),
                f"{a}.q_norm.weight": (d,),
                f"{a}.k_norm.weight": (d,),
                f"{m}.gate_proj.weight": (inter, h),
                f"{m}.up_proj.weight": (inter, h),
                f"{m}.down_proj.weight": (h, inter),
                f"layers.{i}.input_layernorm.weight": (h,),
                f"layers.{i}.post_attention_layernorm.weight": (h,),
            }
        )
    shapes["norm.weight"] = (h,)
    shapes["fc.weight"] = (h, cfg.n_feature_layers * h)
    shapes["hidden_norm.weight"] = (h,)
    return shapes


OPTIONAL_BIASES = ("q_proj", "k_proj", "v_proj", "o_proj")


def drafter_prefix(names: Iterable[str]) -> str:
    """``model.`` when the drafter was saved from a wrapper module, else empty."""
    names = set(names)
    return "model." if "fc.weight" not in names and "model.fc.weight" in names else ""


def fc_width(shapes: Shapes) -> int | None:
    """Input width of ``fc.weight`` (feature layers x hidden size), None when absent."""
    found = shapes.get(drafter_prefix(shapes) + "fc.weight")
    if found is None:
        return None
    return found[1][1] if len(found[1]) == 2 else None


def weight_problems(cfg: DrafterConfig, shapes: Shapes, where: str, problems: Problems) -> None:
    """Add a problem for each missing tensor, wrong shape and unsupported dtype.

    ``fc.weight``'s input width is left to `config_vs_tensors`, which compares it
    with the config (and the cache) in one place.
    """
    prefix = drafter_prefix(shapes)
    missing = []
    expected_shapes = weight_shapes(cfg)
    for name, shape in expected_shapes.items():
        key = prefix + name
        if key not in shapes:
            missing.append(name)
            continue
        dtype, found = shapes[key]
        if dtype not in FLOAT_WEIGHTS:
            problems.add(f"{key}: dtype {dtype}, expected one of F32, F16, BF16")
        if name == "fc.weight":
            if not found or found[0] != shape[0]:
                problems.add(f"{key}: shape {list(found)}, expected [{shape[0]}, ...]")
        elif tuple(found) != shape:
            problems.add(f"{key}: shape {list(found)}, expected {list(shape)} from config.json")
    expected = {prefix + n for n in expected_shapes}
    expected |= {
        f"{prefix}layers.{i}.self_attn.{proj}.bias"
        for i in range(cfg.num_layers)
        for proj in OPTIONAL_BIASES
    }
    extra = sorted(k for k in shapes if k not in expected and not k.endswith("rotary_emb.inv_freq"))
    if extra:
        shown = ", ".join(extra[:4]) + (f" and {len(extra) - 4} more" if len(extra) > 4 else "")
        problems.add(
            f"unexpected tensors in {where}: {shown}",
            "this harness computes the DFlash block forward of docs/design.md 'The block forward'; a drafter with "
            "extra modules (e.g. DFlash 2 convolutions or candidate selector) would be scored wrongly",
        )
    if missing:
        shown = ", ".join(missing[:8]) + (
            f" and {len(missing) - 8} more" if len(missing) > 8 else ""
        )
        problems.add(
            f"missing tensors in {where}: {shown}",
            "the checkpoint is incomplete (copy it again) or not a DFlash drafter",
        )


def drafter_problems(
    raw: Mapping[str, Any], shapes: Shapes, where: str
) -> tuple[DrafterConfig | None, Problems]:
    """Everything wrong with a drafter on its own: its config, then config against tensors.

    The config is None when it cannot be parsed; its problems are then the only ones.
    """
    problems = Problems()
    try:
        cfg = parse_config(dict(raw), f"{where}/config.json")
    except InputError as exc:
        for line in exc.problems or [exc.message]:
            problems.add(line, exc.hint)
        return None, problems
    tensor_problems(cfg, shapes, where, problems)
    return cfg, problems


def tensor_problems(cfg: DrafterConfig, shapes: Shapes, where: str, problems: Problems) -> None:
    """The config against the tensors: one line per contradicted field, then the per-tensor
    lines (missing, extra, dtype; shapes only when no field explains them, else one wrong
    hidden_size gives twenty lines)."""
    fields = config_vs_tensors(cfg, shapes)
    for line in fields:
        problems.add(line, "config.json does not describe these weights: fix the config, or "
                     "check that the two files belong together")  # fmt: skip
    detail = Problems()
    weight_problems(cfg, shapes, where, detail)
    for line in detail.items:
        if not fields or " expected " not in line:
            problems.add(line, "; ".join(detail.hints) or None)


def _rows(shapes: Shapes, key: str, dim: int = 0) -> int | None:
    found = shapes.get(key)
    return found[1][dim] if found is not None and len(found[1]) > dim else None


def config_vs_tensors(cfg: DrafterConfig, shapes: Shapes) -> list[str]:
    """One line per config.json field the tensor shapes contradict (hidden_size, heads,
    kv heads, head_dim, intermediate_size, layers, fc width against the layer ids)."""
    p = drafter_prefix(shapes)
    a, m = f"{p}layers.0.self_attn", f"{p}layers.0.mlp"
    hidden = _rows(shapes, f"{p}norm.weight") or _rows(shapes, f"{a}.q_proj.weight", 1)
    head_dim = _rows(shapes, f"{a}.q_norm.weight")
    q_rows, kv_rows = _rows(shapes, f"{a}.q_proj.weight"), _rows(shapes, f"{a}.k_proj.weight")
    layers = {
        int(name[len(p) + 7 :].split(".", 1)[0])
        for name in shapes
        if name.startswith(f"{p}layers.") and name[len(p) + 7 :].split(".", 1)[0].isdigit()
    }
    seen = {
        "hidden_size": (cfg.hidden_size, hidden, "norm.weight"),
        "head_dim": (cfg.head_dim, head_dim, "q_norm.weight"),
        "num_attention_heads": (
            cfg.num_heads,
            q_rows // head_dim if q_rows and head_dim else None,
            "q_proj rows / head_dim",
        ),
        "num_key_value_heads": (
            cfg.num_kv_heads,
            kv_rows // head_dim if kv_rows and head_dim else None,
            "k_proj rows / head_dim",
        ),
        "intermediate_size": (
            cfg.intermediate_size,
            _rows(shapes, f"{m}.gate_proj.weight"),
            "gate_proj rows",
        ),
        "num_hidden_layers": (cfg.num_layers, len(layers) or None, "layers.N.* in the weights"),
    }
    out = [
        f"{name}: config.json says {said}, the tensors say {found} ({how})"
        for name, (said, found, how) in seen.items()
        if found is not None and said != found
    ]
    width = fc_width(shapes)
    h = hidden or cfg.hidden_size
    if width is not None and width != cfg.n_feature_layers * h:
        out.append(
            f"fc input width: fc.weight takes {width} features, but len(target_layer_ids)="
            f"{cfg.n_feature_layers} x hidden_size={h} = {cfg.n_feature_layers * h}"
        )
    return out


@dataclass(frozen=True)
class CacheFacts:
    """What a cache says about the target, from its manifest and file headers (None: unknown).

    ``feature_widths`` maps sample names to hidden_states' last dimension
    (n_feature_layers x H); ``head_rows`` is the number of token rows both
    embed_tokens and lm_head have; ``head_hidden`` is lm_head's width.
    """

    where: str
    hidden_size: int | None = None
    target_layer_ids: tuple[int, ...] | None = None
    feature_widths: Mapping[str, int] | None = None
    head_rows: int | None = None
    head_hidden: int | None = None
    head_where: str = "target head"
    # a foreign cache holding these layers (our convention): the drafter's must be among them
    held_layer_ids: tuple[int, ...] | None = None


def cache_problems(
    cfg: DrafterConfig, width: int | None, cache: CacheFacts, problems: Problems
) -> None:
    """Add one problem per mismatch between a drafter and a cache (and its target head)."""
    h = cfg.hidden_size
    if cache.hidden_size and h != cache.hidden_size:
        problems.add(
            f"hidden_size: drafter config.json has {h}, {cache.where} has {cache.hidden_size}"
        )
    if cache.target_layer_ids and tuple(cfg.target_layer_ids) != tuple(cache.target_layer_ids):
        problems.add(
            f"target_layer_ids: drafter has {list(cfg.target_layer_ids)}, "
            f"{cache.where} has {list(cache.target_layer_ids)}"
        )
    if cache.held_layer_ids is not None:
        missing = [i for i in cfg.target_layer_ids if i not in cache.held_layer_ids]
        if missing:
            problems.add(
                f"target_layer_ids: the drafter needs {list(cfg.target_layer_ids)}, {cache.where} "
                f"holds {list(cache.held_layer_ids)}; missing {missing}",
                "use a cache extracted for this drafter's target_layer_ids, or check the suite's "
                "cache_layer_ids (docs/evals.md gives each tool's convention)",
            )
    expected = width if width is not None else cfg.n_feature_layers * h
    widths = cache.feature_widths or {}
    wrong = sorted({w for w in widths.values() if w and w != expected})
    if wrong:
        names = [name for name, w in widths.items() if w in wrong][:3]
        problems.add(
            f"fc input width: drafter fc takes {expected} features per token, cache hidden_states "
            f"have {', '.join(map(str, wrong))} (samples {', '.join(names)})"
        )
    if cache.head_hidden is not None and cache.head_hidden != h:
        problems.add(
            f"{cache.head_where}: lm_head is {cache.head_hidden} wide, drafter hidden_size is {h}"
        )
    rows = cache.head_rows
    if rows is None:
        return
    if cfg.vocab_size is not None and cfg.vocab_size != rows:
        problems.add(
            f"vocab size: drafter vocab_size is {cfg.vocab_size}, {cache.head_where} has {rows} rows"
        )
    if not 0 <= cfg.mask_token_id < rows:
        problems.add(
            f"mask_token_id: drafter uses {cfg.mask_token_id}, {cache.head_where} has rows 0..{rows - 1}"
        )
