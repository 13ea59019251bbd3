"""The ``dflash-cache/1`` directory (docs/evals.md "Caches"): manifest, target head, samples.

The target head comes either from ``head`` (default ``target_head.safetensors``,
tensors ``embed_tokens`` and ``lm_head``) or, when the manifest has
``"target": "DIR"``, from a full target model directory, of which only the
embedding and the output head are read from their shards.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from . import CACHE_FORMAT
from .errors import InputError, Problems
from .rules import EMBED_NAMES, HEAD_FILE_NAMES, LM_HEAD_NAMES
from .tensors import FLOAT_WEIGHTS, INTEGERS, ModelFiles, TensorFile


@dataclass
class SampleSpec:
    """A sample named in the manifest, checked and ready for anchor selection."""

    name: str
    path: Path
    length: int = 0
    feature_width: int = 0
    input_ids: torch.Tensor | None = None
    loss_mask: torch.Tensor | None = None
    # foreign caches (foreign.py): reads the first N feature rows in the drafter's layer order
    reader: Callable[[int], torch.Tensor] | None = None


@dataclass
class Manifest:
    """manifest.json, validated."""

    dir: Path
    hidden_size: int
    target_layer_ids: tuple[int, ...]
    samples: list[SampleSpec] = field(default_factory=list)
    head_file: Path | None = None
    target_dir: Path | None = None
    built_by: str | None = None  # the ``built_by.tool`` that wrote it (cache build), if it says
    # a ``--dataset`` build's protocol block (docs/evals.md "The protocol"), passed on as it is
    protocol: dict[str, Any] | None = None


def read_manifest(cache_dir: Path) -> Manifest:
    """Parse and check ``manifest.json``; InputError lists every problem in it."""
    cache_dir = Path(cache_dir)
    path = cache_dir / "manifest.json"
    if not cache_dir.is_dir():
        raise InputError(f"cache: not a directory: {cache_dir}")
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(
            f"cache: {path} not found",
            hint=f"a {CACHE_FORMAT} directory holds manifest.json, the target head and sample "
            "files; SpecForge caches (rows_*/data_*.ckpt[.gz]) and speculators data "
            "(hs_*.safetensors, in the directory or its hidden_states/) are read as well",
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cache: {path} is not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise InputError(f"cache: {path} holds a JSON {type(raw).__name__}, expected an object")
    if raw.get("format") != CACHE_FORMAT:
        raise InputError(
            f"cache: {path}: format is {raw.get('format')!r}, expected {CACHE_FORMAT!r}",
            hint="this harness reads only dflash-cache/1 directories (docs/evals.md 'Caches')",
        )
    p = Problems()
    hidden = raw.get("hidden_size")
    if not isinstance(hidden, int) or isinstance(hidden, bool) or hidden < 1:
        p.add(f"hidden_size: expected a positive integer, found {hidden!r}")
        hidden = 0
    ids = raw.get("target_layer_ids")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, int) for i in ids):
        p.add(f"target_layer_ids: expected a non-empty list of integers, found {ids!r}")
        ids = []
    head_file = target_dir = None
    if raw.get("target") is not None:
        if not isinstance(raw["target"], str):
            p.add(f"target: expected a directory path, found {raw['target']!r}")
        else:
            target_dir = (cache_dir / Path(raw["target"]).expanduser()).resolve()
    else:
        head = raw.get("head", "target_head.safetensors")
        if not isinstance(head, str):
            p.add(f"head: expected a file name, found {head!r}")
        else:
            head_file = cache_dir / head
    samples = []
    entries = raw.get("samples")
    if not isinstance(entries, list) or not entries:
        p.add('samples: expected a non-empty list of {"name": ..., "file": ...}')
        entries = []
    for i, entry in enumerate(entries):
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("name"), str)
            or not isinstance(entry.get("file"), str)
        ):
            p.add(f'samples[{i}]: expected {{"name": str, "file": str}}, found {entry!r}')
            continue
        samples.append(SampleSpec(name=entry["name"], path=cache_dir / entry["file"]))
    p.raise_if_any(f"cache: {path} is not a valid {CACHE_FORMAT} manifest:")
    built = raw.get("built_by")
    tool = built.get("tool") if isinstance(built, dict) else None
    return Manifest(
        cache_dir,
        hidden,
        tuple(ids),
        samples,
        head_file,
        target_dir,
        tool if isinstance(tool, str) else None,
        raw["protocol"] if isinstance(raw.get("protocol"), dict) else None,
    )


class TargetHead:
    """Where the target's ``embed_tokens`` and ``lm_head`` live; read only on ``load``."""

    def __init__(self, manifest: Manifest):
        self._embed: tuple[Any, str]
        self._lm_head: tuple[Any, str]
        if manifest.target_dir is not None:
            self.source = str(manifest.target_dir)
            self._open_target(manifest.target_dir)
        else:
            assert manifest.head_file is not None
            self.source = str(manifest.head_file)
            tf = TensorFile(manifest.head_file, "cache target head")
            keys = tf.keys()
            embed = next((k for k in HEAD_FILE_NAMES["embed"] if k in keys), None)
            lm_head = next((k for k in HEAD_FILE_NAMES["lm_head"] if k in keys), None)
            missing = [n for n, k in (("embed_tokens", embed), ("lm_head", lm_head)) if k is None]
            if missing:
                raise InputError(
                    f"cache target head {manifest.head_file}: missing tensor(s) {', '.join(missing)}",
                    hint=f"it must hold embed_tokens [V, H] and lm_head [V, H]; found {sorted(keys)[:6]}",
                )
            assert embed is not None and lm_head is not None  # else raised above
            self._embed, self._lm_head = (tf, embed), (tf, lm_head)
        self.shapes = {
            "embed_tokens": self._shape(self._embed),
            "lm_head": self._shape(self._lm_head),
        }
        self.dtypes = {
            "embed_tokens": self._dtype(self._embed),
            "lm_head": self._dtype(self._lm_head),
        }

    def _open_target(self, target_dir: Path) -> None:
        if not target_dir.is_dir():
            raise InputError(f"cache: target model directory not found: {target_dir}")
        files = ModelFiles(target_dir, f"target model {target_dir}")
        embed = next((k for k in EMBED_NAMES if k in files), None)
        lm_head = next((k for k in LM_HEAD_NAMES if k in files), None)
        if lm_head is None and embed is not None and self._tied(target_dir):
            lm_head = embed
        missing = [
            n for n, k in ((EMBED_NAMES[0], embed), (LM_HEAD_NAMES[0], lm_head)) if k is None
        ]
        if missing:
            why = ""
            if lm_head is None and embed is not None:
                why = (
                    " (and config.json does not set tie_word_embeddings: true, so the embedding "
                    "is not used in its place)"
                )
            raise InputError(
                f"target model {target_dir}: tensor(s) {', '.join(missing)} not found in its "
                f"weights{why}",
                hint='point --target (or the cache\'s "target") at the target model directory, or '
                "write target_head.safetensors with embed_tokens and lm_head",
            )
        assert embed is not None and lm_head is not None  # else raised above
        self._embed, self._lm_head = (files, embed), (files, lm_head)

    @staticmethod
    def _tied(target_dir: Path) -> bool:
        try:
            cfg = json.loads((target_dir / "config.json").read_text())
        except (OSError, ValueError):
            return False
        text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
        return bool(cfg.get("tie_word_embeddings") or text.get("tie_word_embeddings"))

    @staticmethod
    def _shape(ref: tuple[Any, str]) -> tuple[int, ...]:
        return ref[0].shape(ref[1])

    @staticmethod
    def _dtype(ref: tuple[Any, str]) -> str:
        return ref[0].dtype(ref[1])

    def check(self, problems: Problems) -> None:
        for name in ("embed_tokens", "lm_head"):
            shape, dtype = self.shapes[name], self.dtypes[name]
            if len(shape) != 2:
                problems.add(f"target head {name}: shape {list(shape)}, expected [vocab, hidden]")
            if dtype not in FLOAT_WEIGHTS:
                problems.add(f"target head {name}: dtype {dtype}, expected F32, F16 or BF16")
        if self.shapes["embed_tokens"] != self.shapes["lm_head"]:
            problems.add(
                f"target head: embed_tokens {list(self.shapes['embed_tokens'])} and "
                f"lm_head {list(self.shapes['lm_head'])} differ in shape"
            )

    @property
    def vocab_rows(self) -> int:
        return min(self.shapes["embed_tokens"][0], self.shapes["lm_head"][0])

    def load(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Read (embed_tokens, lm_head) onto the CPU in their stored dtype."""
        embed = self._embed[0].get(self._embed[1])
        lm_head = self._lm_head[0].get(self._lm_head[1])
        return embed, lm_head


SAMPLE_HINT = (
    "a sample file holds input_ids int64 [T], hidden_states [T, n_feature_layers*H] and "
    "loss_mask [T] (docs/evals.md 'Caches'); rewrite it with the cache builder"
)


def check_sample(spec: SampleSpec, problems: Problems) -> TensorFile | None:
    """Read a sample's ids, mask and feature shape; adds problems instead of raising.

    ``hidden_states`` is not read here (only its shape), so checking a large
    cache costs headers plus the small per-token tensors.
    """
    where = f"sample {spec.name!r} ({spec.path.name})"
    try:
        tf = TensorFile(spec.path, f"cache {where}")
    except InputError as exc:
        problems.add_error(exc)
        return None
    keys = tf.keys()
    missing = [k for k in ("input_ids", "hidden_states", "loss_mask") if k not in keys]
    if missing:
        problems.add(
            f"{where}: missing tensor(s) {', '.join(missing)} (found {sorted(keys)[:6]})",
            SAMPLE_HINT,
        )
        return None
    ids_shape, hs_shape, mask_shape = (
        tf.shape(k) for k in ("input_ids", "hidden_states", "loss_mask")
    )
    bad = False
    if len(ids_shape) != 1 or tf.dtype("input_ids") not in INTEGERS:
        problems.add(
            f"{where}: input_ids is {tf.dtype('input_ids')} {list(ids_shape)}, expected int64 [T]",
            SAMPLE_HINT,
        )
        bad = True
    if len(hs_shape) != 2 or tf.dtype("hidden_states") not in FLOAT_WEIGHTS:
        problems.add(
            f"{where}: hidden_states is {tf.dtype('hidden_states')} {list(hs_shape)}, "
            "expected a float [T, n_target_layers*H]",
            SAMPLE_HINT,
        )
        bad = True
    if len(mask_shape) != 1:
        problems.add(f"{where}: loss_mask has shape {list(mask_shape)}, expected [T]", SAMPLE_HINT)
        bad = True
    if bad:
        return None
    if not (ids_shape[0] == hs_shape[0] == mask_shape[0]):
        problems.add(
            f"{where}: lengths differ: input_ids {ids_shape[0]}, hidden_states {hs_shape[0]}, "
            f"loss_mask {mask_shape[0]}",
            SAMPLE_HINT,
        )
        return None
    spec.length = ids_shape[0]
    spec.feature_width = hs_shape[1]
    spec.input_ids = tf.get("input_ids").to(torch.int64)
    spec.loss_mask = tf.get("loss_mask").to(torch.int64)
    return tf


def load_features(spec: SampleSpec, rows: int) -> torch.Tensor:
    """The first ``rows`` rows of a sample's hidden_states, read from disk on demand."""
    if spec.reader is not None:
        return spec.reader(rows)
    return TensorFile(spec.path, f"cache sample {spec.name!r}").get("hidden_states", rows=rows)
