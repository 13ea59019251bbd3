"""Caches the field already has, read as they are (docs/evals.md "Caches"): SpecForge and speculators.

Both are detected by their layout, with no conversion step:

* **SpecForge** (sgl-project/SpecForge ``scripts/prepare_hidden_states.py``):
  ``rows_<a>-<b>/data_<i>.ckpt``, or ``.ckpt.gz`` with ``--compress``, one
  ``torch.save`` dict per sample. The DFlash strategy writes ``input_ids`` [T],
  ``loss_mask`` [T] and ``hidden_states`` [1, T, n*H] (the target layers of the
  draft config's ``dflash_config.target_layer_ids``, concatenated in that
  order); the EAGLE-3 strategy writes ``aux_hidden_state`` [1, T, n*H] and the
  last layer separately as ``hidden_state`` [1, T, H], which is not a feature
  and is ignored. SGLang captures "before layer k+1" for id k, i.e. the output
  of decoder layer k: our convention. The files record no layer ids.
* **speculators** (vllm-project/speculators, hidden states written by vLLM's
  ``extract_hidden_states`` connector): ``hs_<i>.safetensors`` with
  ``hidden_states`` [T, n_layers, H] and ``token_ids`` [T], in
  ``<preprocessed>/hidden_states/``; the loss mask is not in the file but in
  row ``i`` of the preprocessed dataset (``datasets`` ``save_to_disk``:
  ``state.json`` + ``data-*.arrow``, columns ``input_ids`` and ``loss_mask``).
  vLLM's layer id s is the input of decoder layer s, so it is our id s - 1;
  ``launch_vllm.py`` appends the last layer (s = num_hidden_layers) by default.
  The files record no layer ids either.
* **speculators before its vLLM connector** (releases of Nov 2025 to Apr 2026,
  ``scripts/data_generation_offline.py``): ``data_<i>.pt`` per sample, a
  ``torch.save`` dict of ``input_ids`` [T], ``loss_mask`` [T] and
  ``hidden_states``, a *list* of [T, H] tensors, one per layer; its
  ``data_config.json`` records ``hidden_states.layer_ids``. That worker captured
  ``hidden_states + residual`` *after* decoder layer k: our convention, unlike
  the vLLM ids above.

Neither carries the target head (``--target DIR``), and neither says which
layers it holds, so ``--cache-layer-ids`` (in the cache's own convention: the
ids given to the tool that wrote it) is required; a cache holding more layers
than the drafter needs is read for just the drafter's ones.
"""

from __future__ import annotations

import gzip
import io
import json
import pickle
import re
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import torch

from .arrow import read_dataset_columns
from .cache import Manifest, SampleSpec
from .errors import InputError, Problems
from .tensors import (
    DTYPE_NAMES,
    FLOAT_WEIGHTS,
    INTEGERS,
    TensorFile,
    pt_refusal,
    pt_unreadable,
)

SPECFORGE = "specforge"
SPECULATORS = "speculators"
SPECULATORS_PT = "speculators-pt"  # speculators' data_<i>.pt files (before its vLLM connector)
_SPECFORGE_FILE = re.compile(r"data_(\d+)\.ckpt(\.gz)?$")
_SPECULATORS_FILE = re.compile(r"hs_(\d+)\.safetensors$")
_SPECULATORS_PT_FILE = re.compile(r"data_(\d+)\.pt$")
_NAMES = {SPECFORGE: "SpecForge", SPECULATORS: "speculators", SPECULATORS_PT: "speculators"}
T = TypeVar("T")

LAYER_HINTS = {
    SPECFORGE: "pass --cache-layer-ids with the target_layer_ids of the draft config given to "
    "prepare_hidden_states.py (EAGLE-3 strategy: its aux hidden state layer ids), or set "
    "cache_layer_ids in the [[suites]] entry",
    SPECULATORS: "pass --cache-layer-ids with the layer ids given to launch_vllm.py, in vLLM's "
    "convention and with the last layer it appends (e.g. 2,14,25,28), or set cache_layer_ids "
    "in the [[suites]] entry",
    SPECULATORS_PT: "pass --cache-layer-ids with the layer ids data_generation_offline.py "
    "used (its data_config.json records them as hidden_states.layer_ids), or set "
    "cache_layer_ids in the [[suites]] entry",
}


def detect_layout(cache_dir: Path) -> str | None:
    """``specforge``, ``speculators``, ``speculators-pt`` or None (then: dflash-cache/1)."""
    if (cache_dir / "manifest.json").is_file():
        return None
    if any(_SPECFORGE_FILE.match(p.name) for p in cache_dir.glob("rows_*/data_*.ckpt*")):
        return SPECFORGE
    for d in (cache_dir, cache_dir / "hidden_states"):
        if any(_SPECULATORS_FILE.match(p.name) for p in d.glob("hs_*.safetensors")):
            return SPECULATORS
    if any(_SPECULATORS_PT_FILE.match(p.name) for p in cache_dir.glob("data_*.pt")):
        return SPECULATORS_PT
    return None


def _dtype_name(t: torch.Tensor) -> str:
    return DTYPE_NAMES.get(t.dtype, str(t.dtype))


def load_ckpt(path: Path, what: str = "SpecForge sample") -> dict[str, Any]:
    """One sample file: ``torch.load(weights_only=True)``, through gzip for ``.gz``.

    Values are tensors or lists of tensors; None values (an EAGLE-3 file saved
    without aux states) are dropped.
    """
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                data = f.read()
            obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
        else:
            obj = _load_mapped(path)
    except pickle.UnpicklingError as exc:
        raise InputError(
            f"{what}: refusing {path}: {pt_refusal(exc)}",
            hint="cache files are loaded only with torch.load(weights_only=True): a dict of "
            "plain tensors, as the tools that write them do",
        ) from None
    except (gzip.BadGzipFile, zlib.error) as exc:
        raise InputError(f"{what}: {path} is not valid gzip ({exc})") from None
    except (RuntimeError, EOFError, OSError, ValueError) as exc:
        raise pt_unreadable(what, path, exc, "copy the file again, or prepare it again") from None

    def plain(v: object) -> bool:
        if isinstance(v, (list, tuple)):
            return all(isinstance(t, torch.Tensor) for t in v)
        return v is None or isinstance(v, torch.Tensor)

    if not isinstance(obj, dict) or not all(
        isinstance(k, str) and plain(v) for k, v in obj.items()
    ):
        raise InputError(f"{what}: {path} holds a {type(obj).__name__}, expected a dict of tensors")
    return {k: v for k, v in obj.items() if v is not None}


def _load_mapped(path: Path) -> object:
    """torch.load with mmap (only the rows used are read), or without for a legacy file."""
    try:
        return torch.load(str(path), map_location="cpu", weights_only=True, mmap=True)
    except RuntimeError as exc:
        if "mmap" not in str(exc):
            raise
        return torch.load(str(path), map_location="cpu", weights_only=True)


def _squeeze_batch(t: torch.Tensor, dims: int) -> torch.Tensor | None:
    """Drop a leading batch axis of 1; None when the shape is not [..] or [1, ..]."""
    if t.dim() == dims + 1 and t.shape[0] == 1:
        t = t[0]
    return t if t.dim() == dims else None


class ForeignCache:
    """A SpecForge or speculators cache, checked into a Manifest the harness runs on."""

    def __init__(
        self,
        cache_dir: Path,
        layout: str,
        target: Path | None,
        cache_layer_ids: tuple[int, ...] | None,
        drafter_layer_ids: tuple[int, ...],
        drafter_hidden: int,
    ):
        self.dir = cache_dir
        self.layout = layout
        self.drafter_ids = drafter_layer_ids
        self.drafter_hidden = drafter_hidden
        self.what = f"{_NAMES[layout]} cache {cache_dir}"
        if target is None:
            raise InputError(
                f"{self.what}: it carries no target head",
                hint="pass --target DIR (the target model directory; only model.embed_tokens.weight "
                'and lm_head.weight are read), or set target = "host:DIR" in the [[suites]] entry',
            )
        self.target = target
        self.cache_ids = cache_layer_ids

    # -- layer ids ---------------------------------------------------------

    def _held_ids(self, n_layers: int | None) -> tuple[int, ...]:
        """The cache's layers in our convention (decoder-layer outputs), checked against its shape."""
        if self.cache_ids is None:
            count = ""
            if n_layers and self.layout == SPECFORGE:
                count = f" ({n_layers} per token, if theirs is the drafter's hidden size)"
            elif n_layers:
                count = f" ({n_layers} per token)"
            raise InputError(
                f"{self.what}: its files do not record which target layers they hold{count}; "
                f"the drafter needs {list(self.drafter_ids)} (decoder-layer outputs, "
                "hidden_states[id + 1] of a transformers forward), and a cache with the same "
                "count may still hold other layers",
                hint=LAYER_HINTS[self.layout] + self._default_note(),
            )
        held = self.cache_ids
        if self.layout == SPECULATORS:
            if 0 in held:
                raise InputError(
                    f"{self.what}: --cache-layer-ids {','.join(map(str, held))} has 0, the "
                    "embeddings (speculators ids are vLLM's: the input of decoder layer s)"
                )
            held = tuple(s - 1 for s in held)
        return held

    def _default_note(self) -> str:
        n = _target_depth(self.target) if self.layout != SPECFORGE else None
        if n is None:
            return ""
        if self.layout == SPECULATORS_PT:
            ids = [2, n // 2, n - 3, n - 1]
            return (
                f"; data_generation_offline.py's default for this {n}-layer target is "
                f"{','.join(map(str, ids))} (the same convention as the drafter's)"
            )
        ids = [2, n // 2, n - 3, n]
        return (
            f"; launch_vllm.py's default for this {n}-layer target is {','.join(map(str, ids))} "
            f"(our ids {','.join(str(i - 1) for i in ids)}); the drafter needs vLLM ids "
            f"{','.join(str(i + 1) for i in self.drafter_ids)}"
        )

    def _slots(self, held: tuple[int, ...]) -> list[int]:
        missing = [i for i in self.drafter_ids if i not in held]
        if missing:
            shown = ",".join(map(str, self.cache_ids or ()))
            raise InputError(
                f"{self.what}: the drafter needs target layers {list(self.drafter_ids)} but "
                f"--cache-layer-ids {shown} means the cache holds {list(held)} "
                f"(our convention); missing {missing}",
                hint="use a cache extracted for this drafter's target_layer_ids, or check "
                "--cache-layer-ids (docs/evals.md 'Caches' gives each tool's convention)",
            )
        return [held.index(i) for i in self.drafter_ids]

    # -- reading -----------------------------------------------------------

    def manifest(self, problems: Problems) -> Manifest:
        if self.layout == SPECFORGE:
            samples = self._specforge(problems)
        elif self.layout == SPECULATORS_PT:
            samples = self._speculators_pt(problems)
        else:
            samples = self._speculators(problems)
        return Manifest(
            dir=self.dir,
            hidden_size=0,  # checked against the drafter in _finish, in this cache's words
            target_layer_ids=self.drafter_ids,
            samples=samples,
            head_file=None,
            target_dir=self.target,
        )

    def _specforge(self, problems: Problems) -> list[SampleSpec]:
        files = _numbered(self.dir, "rows_*/data_*.ckpt*", _SPECFORGE_FILE)
        samples: list[SampleSpec] = []
        keys: dict[str, str] = {}
        widths: set[int] = set()
        for _, path, data in _each_opened(files, load_ckpt, problems):
            where = f"SpecForge sample {path.relative_to(self.dir)}"
            key = "hidden_states" if "hidden_states" in data else "aux_hidden_state"
            missing = [k for k in ("input_ids", "loss_mask", key) if k not in data]
            if key not in data and "hidden_state" not in data:
                missing[-1] = "hidden_states (DFlash strategy; aux_hidden_state for EAGLE-3)"
            if missing:
                extra = (
                    " (it holds only the last layer, hidden_state: prepare it with the target "
                    "layers, e.g. the DFlash strategy)"
                    if "hidden_state" in data and key == "aux_hidden_state"
                    else ""
                )
                problems.add(
                    f"{where}: missing {', '.join(missing)}{extra} (found {sorted(data)})",
                    "a SpecForge sample holds input_ids, loss_mask and hidden_states "
                    "(DFlash strategy) or aux_hidden_state (EAGLE-3 strategy)",
                )
                continue
            spec = self._check(where, path, data["input_ids"], data["loss_mask"], problems)
            feats = _squeeze_batch(data[key], 2)
            if spec is None:
                continue
            if feats is None or _dtype_name(feats) not in FLOAT_WEIGHTS:
                problems.add(
                    f"{where}: {key} is {_dtype_name(data[key])} {list(data[key].shape)}, "
                    "expected a float [T, n*H] or [1, T, n*H]"
                )
                continue
            if feats.shape[0] != spec.length:
                problems.add(
                    f"{where}: lengths differ: input_ids {spec.length}, {key} {feats.shape[0]}"
                )
                continue
            widths.add(feats.shape[1])
            spec.feature_width = feats.shape[1]
            samples.append(spec)
            keys[spec.name] = key
        if not files:
            problems.add(f"{self.what}: no rows_*/data_*.ckpt files")
        if len(widths) > 1:
            problems.add(f"{self.what}: samples differ in feature width: {sorted(widths)}")
        if problems or not samples:
            return samples
        width = widths.pop()
        per_token = width // self.drafter_hidden if width % self.drafter_hidden == 0 else None
        held = self._held_ids(per_token)
        if width % len(held):
            raise InputError(
                f"{self.what}: hidden_states are {width} wide, not a multiple of the "
                f"{len(held)} layers --cache-layer-ids names",
                hint=LAYER_HINTS[SPECFORGE],
            )
        hidden = width // len(held)
        slots = self._finish(samples, held, hidden, problems)
        for spec in samples:
            spec.reader = _specforge_reader(spec.path, keys[spec.name], slots, hidden)
        return samples

    def _speculators(self, problems: Problems) -> list[SampleSpec]:
        hs_dir = self.dir / "hidden_states"
        if not any(hs_dir.glob("hs_*.safetensors")):
            hs_dir = self.dir
        dataset = next((d for d in (self.dir, hs_dir.parent) if (d / "state.json").is_file()), None)
        if dataset is None:
            raise InputError(
                f"{self.what}: no preprocessed dataset (state.json, data-*.arrow) next to the "
                "hidden state files; speculators keeps each sample's loss_mask there, not in "
                "hs_<i>.safetensors",
                hint="point --cache at the directory prepare_data.py wrote (holding hidden_states/), "
                "or copy that dataset next to the hidden_states directory",
            )
        rows = read_dataset_columns(dataset, ("input_ids", "loss_mask"))
        files = _numbered(hs_dir, "hs_*.safetensors", _SPECULATORS_FILE)
        samples: list[SampleSpec] = []
        shapes: set[tuple[int, int]] = set()
        opened = _each_opened(
            files, lambda p: TensorFile(p, f"speculators sample {p.name}"), problems
        )
        for index, path, tf in opened:
            where = f"speculators sample {path.name}"
            missing = [k for k in ("hidden_states", "token_ids") if k not in tf]
            if missing:
                problems.add(f"{where}: missing tensor(s) {', '.join(missing)}")
                continue
            hs_shape = tf.shape("hidden_states")
            if len(hs_shape) != 3 or tf.dtype("hidden_states") not in FLOAT_WEIGHTS:
                problems.add(
                    f"{where}: hidden_states is {tf.dtype('hidden_states')} {list(hs_shape)}, "
                    "expected a float [T, n_layers, H]"
                )
                continue
            if index >= len(rows):
                problems.add(
                    f"{where}: the dataset {dataset} has only {len(rows)} rows, "
                    f"no row {index} for its loss_mask"
                )
                continue
            ids = rows.row("input_ids", index)
            mask = rows.row("loss_mask", index)
            spec = self._check(where, path, tf.get("token_ids"), mask, problems)
            if spec is None:
                continue
            assert spec.input_ids is not None
            if not torch.equal(spec.input_ids, ids):
                problems.add(
                    f"{where}: token_ids differ from input_ids of row {index} of the dataset "
                    f"{dataset} (the file belongs to another dataset or order)"
                )
                continue
            if hs_shape[0] != spec.length:
                problems.add(
                    f"{where}: lengths differ: token_ids {spec.length}, hidden_states {hs_shape[0]}"
                )
                continue
            shapes.add((hs_shape[1], hs_shape[2]))
            samples.append(spec)
        if not files:
            problems.add(f"{self.what}: no hs_<i>.safetensors files")
        slots = self._layer_slots(
            samples,
            shapes,
            problems,
            SPECULATORS,
            lambda named, n: (
                f"--cache-layer-ids names {named} layers, the files hold {n} per token"
            ),
        )
        if slots is not None:
            for spec in samples:
                spec.reader = _speculators_reader(spec.path, slots)
        return samples

    def _recorded_ids(self, problems: Problems) -> None:
        """speculators' data_config.json names its layers; --cache-layer-ids must agree."""
        path = self.dir / "data_config.json"
        if not path.is_file():
            return
        try:
            ids = json.loads(path.read_text())["hidden_states"]["layer_ids"]
            ids = tuple(int(i) for i in ids)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            problems.add(f"{path}: no hidden_states.layer_ids ({type(exc).__name__}: {exc})")
            return
        if self.cache_ids is not None and self.cache_ids != ids:
            problems.add(
                f"--cache-layer-ids {','.join(map(str, self.cache_ids))}: {path} records "
                f"layer_ids {list(ids)}",
                "drop --cache-layer-ids: the cache names its layers",
            )
        self.cache_ids = ids

    def _speculators_pt(self, problems: Problems) -> list[SampleSpec]:
        self._recorded_ids(problems)
        files = _numbered(self.dir, "data_*.pt", _SPECULATORS_PT_FILE)
        samples: list[SampleSpec] = []
        shapes: set[tuple[int, int]] = set()
        for _, path, data in _each_opened(
            files, lambda p: load_ckpt(p, "speculators sample"), problems
        ):
            where = f"speculators sample {path.name}"
            missing = [k for k in ("input_ids", "loss_mask", "hidden_states") if k not in data]
            if missing:
                problems.add(f"{where}: missing {', '.join(missing)} (found {sorted(data)})")
                continue
            spec = self._check(where, path, data["input_ids"], data["loss_mask"], problems)
            layers = data["hidden_states"]
            if spec is None:
                continue
            if (
                not isinstance(layers, (list, tuple))
                or not layers
                or any(t.dim() != 2 or _dtype_name(t) not in FLOAT_WEIGHTS for t in layers)
                or len({tuple(t.shape) for t in layers}) != 1
            ):
                problems.add(
                    f"{where}: hidden_states must be a list of float [T, H] tensors, one per layer"
                )
                continue
            if layers[0].shape[0] != spec.length:
                problems.add(
                    f"{where}: lengths differ: input_ids {spec.length}, "
                    f"hidden_states {layers[0].shape[0]}"
                )
                continue
            shapes.add((len(layers), layers[0].shape[1]))
            samples.append(spec)
        if not files:
            problems.add(f"{self.what}: no data_<i>.pt files")
        slots = self._layer_slots(
            samples,
            shapes,
            problems,
            SPECULATORS_PT,
            lambda named, n: f"{named} layer ids for files holding {n} layers",
        )
        if slots is not None:
            for spec in samples:
                spec.reader = _layer_list_reader(spec.path, slots)
        return samples

    def _check(
        self,
        where: str,
        path: Path,
        ids: torch.Tensor,
        mask: torch.Tensor,
        problems: Problems,
    ) -> SampleSpec | None:
        """A SampleSpec with ids and mask, or None after adding what is wrong."""
        ids1, mask1 = _squeeze_batch(ids, 1), _squeeze_batch(mask, 1)
        if ids1 is None or _dtype_name(ids1) not in INTEGERS:
            problems.add(
                f"{where}: input ids are {_dtype_name(ids)} {list(ids.shape)}, expected int [T]"
            )
            return None
        if mask1 is None or (_dtype_name(mask1) not in INTEGERS and mask1.dtype != torch.bool):
            problems.add(
                f"{where}: loss_mask is {_dtype_name(mask)} {list(mask.shape)}, expected [T]"
            )
            return None
        if ids1.shape[0] != mask1.shape[0]:
            problems.add(
                f"{where}: lengths differ: input ids {ids1.shape[0]}, loss_mask {mask1.shape[0]}"
            )
            return None
        name = path.name.split(".")[0]
        return SampleSpec(
            name=name,
            path=path,
            length=int(ids1.shape[0]),
            input_ids=ids1.to(torch.int64).clone(),
            loss_mask=mask1.to(torch.int64).clone(),
        )

    def _layer_slots(
        self,
        samples: list[SampleSpec],
        shapes: set[tuple[int, int]],
        problems: Problems,
        fmt: str,
        mismatch: Callable[[int, int], str],
    ) -> list[int] | None:
        """For the layouts that keep one [H] per layer: every sample's [n_layers, H]
        must agree and --cache-layer-ids (or the recorded ids) name n_layers layers;
        then `_finish`. None when there is nothing to read (problems, or no samples);
        `mismatch(named, n_layers)` words a wrong count of ids."""
        if len(shapes) > 1:
            problems.add(f"{self.what}: samples differ in [n_layers, H]: {sorted(shapes)}")
        if problems or not samples:
            return None
        n_layers, hidden = shapes.pop()
        held = self._held_ids(n_layers)
        if len(held) != n_layers:
            raise InputError(f"{self.what}: {mismatch(len(held), n_layers)}", hint=LAYER_HINTS[fmt])
        return self._finish(samples, held, hidden, problems)

    def _finish(
        self, samples: list[SampleSpec], held: tuple[int, ...], hidden: int, problems: Problems
    ) -> list[int]:
        """Pick the drafter's layers; every sample's feature width becomes theirs."""
        slots = self._slots(held)
        if hidden != self.drafter_hidden:
            problems.add(
                f"hidden_size: drafter config.json has {self.drafter_hidden}, {self.what} holds "
                f"{hidden}-wide layers"
            )
        for spec in samples:
            spec.feature_width = len(slots) * hidden
        return slots


def _numbered(folder: Path, glob: str, name: re.Pattern[str]) -> list[tuple[int, Path]]:
    """The files `glob` finds under `folder` whose `name` matches, by the number it
    captures (each layout numbers its sample files)."""
    return sorted((int(m.group(1)), p) for p in folder.glob(glob) if (m := name.match(p.name)))


def _each_opened(
    files: list[tuple[int, Path]], open_one: Callable[[Path], T], problems: Problems
) -> Iterator[tuple[int, Path, T]]:
    """Each numbered file with what `open_one` made of it; one it cannot read is a
    problem (InputError) and skipped, so every unreadable sample is reported."""
    for index, path in files:
        try:
            opened = open_one(path)
        except InputError as exc:
            problems.add_error(exc)
            continue
        yield index, path, opened


def _target_depth(target: Path) -> int | None:
    try:
        cfg = json.loads((target / "config.json").read_text())
    except (OSError, ValueError):
        return None
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
    n = text.get("num_hidden_layers")
    return n if isinstance(n, int) else None


def _pick(features: torch.Tensor, slots: list[int], hidden: int) -> torch.Tensor:
    """Columns of the chosen layers, in the drafter's order, from [rows, n*H]."""
    if slots == list(range(features.shape[1] // hidden)):
        return features
    return torch.cat([features[:, s * hidden : (s + 1) * hidden] for s in slots], dim=1)


def _specforge_reader(
    path: Path, key: str, slots: list[int], hidden: int
) -> Callable[[int], torch.Tensor]:
    def read(rows: int) -> torch.Tensor:
        feats = _squeeze_batch(load_ckpt(path)[key], 2)
        assert feats is not None
        return _pick(feats[:rows], slots, hidden).clone()  # clone: let go of the mmap

    return read


def _layer_list_reader(path: Path, slots: list[int]) -> Callable[[int], torch.Tensor]:
    def read(rows: int) -> torch.Tensor:
        layers = load_ckpt(path, "speculators sample")["hidden_states"]
        return torch.cat([layers[s][:rows] for s in slots], dim=1).clone()

    return read


def _speculators_reader(path: Path, slots: list[int]) -> Callable[[int], torch.Tensor]:
    def read(rows: int) -> torch.Tensor:
        tf = TensorFile(path, f"speculators sample {path.name}")
        hs = tf.get("hidden_states", rows=rows)  # [rows, n_layers, H]
        return hs[:, slots].flatten(1)

    return read
