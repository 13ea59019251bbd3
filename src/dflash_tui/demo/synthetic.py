"""Tiny synthetic DFlash drafters and ``dflash-cache/1`` caches for tests and the demo.

Real checkpoints are gigabytes and come from a GPU cluster; these are a few
hundred kilobytes, written in exactly the real formats (docs/design.md "Drafter checkpoint"; docs/evals.md "Caches"), and
built so that eval numbers mean something:

* :func:`write_drafter` writes a random z-lab-format drafter, or, given
  ``teacher=DIR`` and ``quality=q``, a copy of the teacher whose weights are
  interpolated between the teacher's and noise (:func:`noise_share`). Quality
  1.0 reproduces the teacher;
  lower quality scores lower, monotonically in expectation. The demo's
  "trainer" writes checkpoints with rising quality to look like training.
* :func:`write_cache` writes a cache whose continuation tokens come from the
  teacher's own greedy block predictions, the way speculative decoding
  produces them: at an anchor the teacher's block is accepted for a random
  number of leading tokens (each kept with probability ``accept_prob``),
  then a "correction" token is written (often the teacher's runner-up, so
  top-k streaks exceed top-1 ones) and the next anchor starts there. The
  teacher's ``streak_top1`` at each such anchor is the accepted length, so
  streaks vary per anchor and per task, and a perfect drafter scores about
  ``sum(accept_prob**k for k in 1..B-1)``. Blocks go on to the sample's end
  (the last ones cut short, as a decoder's are), so with a response mask
  (``anchors="all"``) the teacher's greedy decoding path (``tau_greedy``) is
  the path the cache was written along.

Both write through a small built-in safetensors writer, so neither numpy nor a
GPU is needed. The forward used to make the tokens is the harness's own.
"""

from __future__ import annotations

import ctypes
import json
import math
import random
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from dflash_tui.shipped.harness import CACHE_FORMAT
from dflash_tui.shipped.harness.drafter import SLIDING, DrafterFiles, parse_config, weight_shapes
from dflash_tui.shipped.harness.model import DrafterModel, block_logits

_ST_DTYPES = {
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.float64: "F64",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.uint8: "U8",
    torch.bool: "BOOL",
}
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def save_safetensors(
    path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None
) -> Path:
    """Write ``tensors`` in the safetensors format (little-endian, no numpy needed)."""
    header: dict[str, Any] = {"__metadata__": metadata or {"format": "pt"}}
    blobs, offset = [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        size = t.numel() * t.element_size()
        header[name] = {
            "dtype": _ST_DTYPES[t.dtype],
            "shape": list(t.shape),
            "data_offsets": [offset, offset + size],
        }
        blobs.append(ctypes.string_at(t.data_ptr(), size) if size else b"")
        offset += size
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for blob in blobs:
            f.write(blob)
    return path


def _dtype(name: str) -> torch.dtype:
    if name not in _DTYPES:
        raise ValueError(f"dtype must be one of {sorted(_DTYPES)}, got {name!r}")
    return _DTYPES[name]


def _random_weights(
    shapes: dict[str, tuple[int, ...]], gen: torch.Generator
) -> dict[str, torch.Tensor]:
    """Matrices ~ N(0, 1/fan_in); norm weights ~ 1 + N(0, 0.1^2)."""
    out = {}
    for name, shape in shapes.items():
        if len(shape) == 1:
            out[name] = 1.0 + 0.1 * torch.randn(shape, generator=gen)
        else:
            out[name] = torch.randn(shape, generator=gen) / math.sqrt(shape[1])
    return out


def _save_model(out: Path, tensors: dict[str, torch.Tensor], sharded: bool) -> None:
    """``model.safetensors``, or two shards plus ``model.safetensors.index.json``."""
    if not sharded:
        save_safetensors(out / "model.safetensors", tensors)
        return
    names = sorted(tensors)
    half = len(names) // 2
    shards = {
        "model-00001-of-00002.safetensors": names[:half],
        "model-00002-of-00002.safetensors": names[half:],
    }
    weight_map = {}
    for file, keys in shards.items():
        save_safetensors(out / file, {k: tensors[k] for k in keys})
        weight_map.update(dict.fromkeys(keys, file))
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=1) + "\n")


def noise_share(quality: float) -> float:
    """Share of noise in a student's weights: ``min(1, -ln(quality) / 8)``, 1 at quality 0.

    A tiny random drafter loses its streaks once about a third of its weights is
    noise, so a linear share would put the whole score change in the top tenth
    of the quality range; this map spreads it out roughly linearly.
    """
    if quality <= 0.0:
        return 1.0
    return min(1.0, -math.log(quality) / 8.0)


def write_drafter(
    out_dir: Path,
    *,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    head_dim: int = 16,
    intermediate_size: int = 128,
    vocab_size: int = 256,
    block_size: int = 16,
    target_layer_ids: tuple[int, ...] = (1, 3),
    num_target_layers: int = 4,
    sliding: bool = False,
    sliding_window: int = 8,
    sharded: bool = False,
    dtype: str = "float32",
    nested_config: bool = True,
    extra_config: dict[str, Any] | None = None,
    seed: int = 0,
    teacher: Path | None = None,
    quality: float = 1.0,
) -> Path:
    """Write a tiny drafter checkpoint in z-lab format to ``out_dir``; returns ``out_dir``.

    Knobs:
      hidden_size .. vocab_size, block_size: the architecture (config.json).
      target_layer_ids / num_target_layers: feature layers (``fc`` takes
        ``len(target_layer_ids) * hidden_size``) and the target's depth.
      sliding: alternate ``sliding_attention`` / ``full_attention`` layers
        (first one sliding) with ``sliding_window``.
      sharded: two shards plus ``model.safetensors.index.json``.
      dtype: "float32", "bfloat16" or "float16" weights.
      nested_config: put mask_token_id / target_layer_ids / block_size under
        ``dflash_config`` (as z-lab does) rather than at the top level.
      extra_config: merged into config.json last (e.g. ``input_embedding_scale``,
        ``output_multiplier``, ``final_logit_softcapping``).
      teacher, quality: when ``teacher`` is a drafter directory, its config is
        reused (the architecture knobs above are ignored) and each weight is
        ``(1 - t) * teacher + t * noise(seed)`` with ``t = noise_share(quality)``;
        quality in [0, 1], 1.0 is the teacher itself, 0.0 pure noise.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if not 0.0 <= quality <= 1.0:
        raise ValueError(f"quality must be in [0, 1], got {quality}")
    gen = torch.Generator().manual_seed(seed)
    if teacher is not None:
        src = DrafterFiles(Path(teacher))
        config = json.loads((Path(teacher) / "config.json").read_text())
        shapes = weight_shapes(src.config)
        noise = _random_weights(shapes, gen)
        t = noise_share(quality)
        tensors = {n: (1.0 - t) * src.files.get(src.key(n)).float() + t * noise[n] for n in shapes}
        config["synthetic"] = {
            "teacher": str(Path(teacher).resolve()),
            "quality": quality,
            "seed": seed,
        }
    else:
        layer_types = [
            SLIDING if sliding and i % 2 == 0 else "full_attention" for i in range(num_layers)
        ]
        dflash = {
            "mask_token_id": vocab_size - 1,
            "target_layer_ids": list(target_layer_ids),
            "block_size": block_size,
        }
        config = {
            "architectures": ["DFlashDraftModel"],
            "model_type": "qwen3",
            "hidden_size": hidden_size,
            "intermediate_size": intermediate_size,
            "num_hidden_layers": num_layers,
            "num_attention_heads": num_heads,
            "num_key_value_heads": num_kv_heads,
            "head_dim": head_dim,
            "hidden_act": "silu",
            "attention_bias": False,
            "rms_norm_eps": 1e-6,
            "rope_theta": 10000.0,
            "max_position_embeddings": 4096,
            "vocab_size": vocab_size,
            "layer_types": layer_types,
            "sliding_window": sliding_window if sliding else None,
            # Qwen3Config drops the window unless this is true (z-lab's model runs none)
            "use_sliding_window": bool(sliding),
            "num_target_layers": num_target_layers,
            "tie_word_embeddings": False,
        }
        if nested_config:
            config["dflash_config"] = dflash
        else:
            config.update(dflash)
        config["synthetic"] = {"seed": seed}
        tensors = _random_weights(weight_shapes(parse_config(config, "synthetic config")), gen)
    config["torch_dtype"] = dtype
    config.update(extra_config or {})
    target = _dtype(dtype)
    _save_model(out, {k: v.to(target) for k, v in tensors.items()}, sharded)
    (out / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    return out


@dataclass
class _Sample:
    name: str
    ids: torch.Tensor
    features: torch.Tensor
    mask: torch.Tensor
    accept: float
    pos: int


def _write_tensors(path: Path, tensors: dict[str, torch.Tensor], fmt: str) -> None:
    if fmt == "pt":
        torch.save(tensors, path)
    else:
        save_safetensors(path, tensors)


def write_cache(
    out_dir: Path,
    *,
    drafter_dir: Path,
    n_samples: int = 4,
    seq_len: int = 128,
    task_names: list[str] | None = None,
    seed: int = 0,
    fmt: str = "safetensors",
    target: str = "file",
    accept_prob: float = 0.75,
    accept_spread: float = 0.15,
    near_miss: float = 0.5,
    prompt_len: int | None = None,
    anchors: str = "blocks",
    dtype: str = "float32",
    logit_scale: float = 4.0,
) -> Path:
    """Write a ``dflash-cache/1`` directory matching ``drafter_dir`` (the teacher); returns it.

    Knobs:
      n_samples, seq_len: number of sample files and tokens per sample.
      task_names: sample names (default ``task0..``); repeat a name to make a
        task of several samples.
      fmt: "safetensors" or "pt" for the sample files and the head.
      target: "file" writes ``target_head.safetensors`` (or ``.pt``);
        "model_dir" writes a sharded target model under ``target/`` (with
        decoy tensors) and points the manifest at it with ``"target"``.
      accept_prob: chance the teacher's next predicted token is kept; each
        sample draws its own from ``accept_prob +- accept_spread`` so tasks differ.
      near_miss: chance the correction token is the teacher's rank 1..3
        candidate (inside top-4) rather than a random token.
      prompt_len: leading tokens with loss_mask 0 (default ``seq_len // 8``);
        0 lets an anchor sit at position 0 (empty context).
      anchors: "blocks" marks only the block starts (streaks follow the
        knobs above); "all" marks every position from ``prompt_len`` on, as a
        real response mask does.
      dtype: dtype of hidden_states and of the head.
      logit_scale: spread of the head's logits (higher: more confident drafts).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if (
        fmt not in ("safetensors", "pt")
        or target not in ("file", "model_dir")
        or anchors not in ("blocks", "all")
    ):
        raise ValueError("fmt must be safetensors|pt, target file|model_dir, anchors blocks|all")
    files = DrafterFiles(Path(drafter_dir))
    cfg = files.config
    model = DrafterModel(cfg, files.load(torch.device("cpu"), torch.float32))
    h, v, b = cfg.hidden_size, cfg.vocab_size or cfg.mask_token_id + 1, cfg.block_size
    store = _dtype(dtype)
    gen = torch.Generator().manual_seed(seed)
    rng = random.Random(seed)
    # round through the stored dtype so the teacher sees exactly what the harness will read
    embed = torch.randn(v, h, generator=gen).to(store)
    lm_head = (torch.randn(v, h, generator=gen) * (logit_scale / math.sqrt(h))).to(store)
    embed_f, lm_head_f = embed.float(), lm_head.float()
    names = task_names or [f"task{i}" for i in range(n_samples)]
    if len(names) != n_samples:
        raise ValueError(f"task_names has {len(names)} names for n_samples={n_samples}")
    start = seq_len // 8 if prompt_len is None else prompt_len
    samples = []
    for name in names:
        ids = torch.randint(0, v, (seq_len,), generator=gen)
        feats = torch.randn(seq_len, cfg.n_feature_layers * h, generator=gen).to(store)
        accept = min(0.98, max(0.0, accept_prob + rng.uniform(-accept_spread, accept_spread)))
        samples.append(
            _Sample(name, ids, feats, torch.zeros(seq_len, dtype=torch.int64), accept, start)
        )
    contexts = [model.context(s.features.float()) for s in samples]
    while True:
        # blocks go on to the end, the last ones cut short, as a decoder's do; their
        # anchors are marked like the others but score no all-anchor metric (no whole block)
        active = [i for i, s in enumerate(samples) if s.pos < seq_len - 1]
        if not active:
            break
        anchor_pos = torch.tensor([samples[i].pos for i in active])
        tokens = torch.stack([samples[i].ids[samples[i].pos] for i in active])
        hidden = model.block_hidden(
            [contexts[i] for i in active],
            torch.arange(len(active)),
            anchor_pos,
            model.embed_block(embed_f, tokens),
        )
        logits = block_logits(cfg, hidden, lm_head_f)
        order = torch.sort(logits, dim=-1, descending=True, stable=True).indices[..., :4]
        for row, i in enumerate(active):
            s = samples[i]
            a = s.pos
            room = min(b - 1, seq_len - 1 - a)  # labels that exist after this anchor
            kept = 0
            while kept < room and rng.random() < s.accept:
                kept += 1
            s.ids[a + 1 : a + 1 + kept] = order[row, :kept, 0]
            if kept < room:
                best = int(order[row, kept, 0])
                if rng.random() < near_miss:
                    s.ids[a + 1 + kept] = order[row, kept, rng.randint(1, 3)]
                else:
                    s.ids[a + 1 + kept] = (best + rng.randint(1, v - 1)) % v
            s.mask[a] = 1
            s.pos = a + 1 + kept  # past the end once the last block took every label
    if anchors == "all":
        for s in samples:
            s.mask[start:] = 1
    suffix = ".pt" if fmt == "pt" else ".safetensors"
    entries = []
    for i, s in enumerate(samples):
        file = f"{i:03d}_{s.name}{suffix}"
        _write_tensors(
            out / file, {"input_ids": s.ids, "hidden_states": s.features, "loss_mask": s.mask}, fmt
        )
        entries.append({"name": s.name, "file": file})
    manifest: dict[str, Any] = {
        "format": CACHE_FORMAT,
        "target_layer_ids": list(cfg.target_layer_ids),
        "hidden_size": h,
    }
    if target == "model_dir":
        _write_target_model(out / "target", embed, lm_head, gen)
        manifest["target"] = "target"
    else:
        head_file = f"target_head{suffix}"
        _write_tensors(out / head_file, {"embed_tokens": embed, "lm_head": lm_head}, fmt)
        manifest["head"] = head_file
    manifest["samples"] = entries
    manifest["synthetic"] = {
        "teacher": str(Path(drafter_dir).resolve()),
        "seed": seed,
        "accept_prob": accept_prob,
        "near_miss": near_miss,
        "anchors": anchors,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return out


def _write_target_model(
    out: Path, embed: torch.Tensor, lm_head: torch.Tensor, gen: torch.Generator
) -> None:
    """A stand-in target model: two shards, an index, and decoy tensors the harness must skip."""
    out.mkdir(parents=True, exist_ok=True)
    h = embed.shape[1]
    decoys = {
        "model.layers.0.mlp.up_proj.weight": torch.randn(2 * h, h, generator=gen).to(embed.dtype),
        "model.norm.weight": torch.ones(h, dtype=embed.dtype),
    }
    shards = {
        "model-00001-of-00002.safetensors": {
            "model.embed_tokens.weight": embed,
            **dict(list(decoys.items())[:1]),
        },
        "model-00002-of-00002.safetensors": {
            "lm_head.weight": lm_head,
            **dict(list(decoys.items())[1:]),
        },
    }
    weight_map = {}
    for file, tensors in shards.items():
        save_safetensors(out / file, tensors)
        weight_map.update(dict.fromkeys(tensors, file))
    (out / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": weight_map}) + "\n"
    )
    cfg = {
        "architectures": ["Qwen3ForCausalLM"],
        "hidden_size": h,
        "vocab_size": embed.shape[0],
        "tie_word_embeddings": False,
    }
    (out / "config.json").write_text(json.dumps(cfg) + "\n")
