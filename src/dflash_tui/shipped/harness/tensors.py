"""Lazy, safe access to tensors in safetensors and ``.pt`` files.

safetensors files are opened with ``safe_open`` and a tensor is read only when
asked for, so checking names and shapes costs a header read, and a multi-GB
target model gives up just the two tensors the harness needs. ``.pt`` files are
loaded only with ``torch.load(..., weights_only=True)``: a file holding pickled
Python objects is refused with a message, never executed.
"""

from __future__ import annotations

import json
import pickle
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open

from .errors import InputError
from .rules import FLOAT_WEIGHTS as FLOAT_WEIGHTS  # re-exported: foreign.py, cache.py

# safetensors dtype names; .pt tensors are reported with the same names.
DTYPES: dict[str, torch.dtype] = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}
DTYPE_NAMES: dict[torch.dtype, str] = {v: k for k, v in DTYPES.items()}
INTEGERS = ("I64", "I32", "I16", "I8", "U8")


def pt_refusal(exc: BaseException) -> str:
    """The one useful line of torch's long weights_only refusal (e.g. the unsupported global)."""
    text = str(exc)
    match = re.search(r"Unsupported global: GLOBAL ([\w.]+)", text)
    if match:
        return f"it contains a pickled Python object ({match.group(1)})"
    match = re.search(r"WeightsUnpickler error: ([^\n]+)", text)
    if match:
        return f"torch refused it: {match.group(1).strip()}"
    return "it is not a plain tensor file"


def pt_unreadable(what: str, path: Path, exc: BaseException, hint: str) -> InputError:
    """The error for a ``.pt`` file torch.load could not read: cut short, or not one."""
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return InputError(
        f"{what}: cannot read {path}: truncated or not a torch file ({first})", hint=hint
    )


class TensorFile:
    """One safetensors or ``.pt`` file, read by tensor name.

    Raises InputError naming the file for anything unreadable: a missing file, a
    truncated or foreign safetensors file, a ``.pt`` with pickled objects.
    """

    def __init__(self, path: Path, what: str):
        self.path = Path(path)
        self.what = what
        self._st: Any = None
        self._pt: dict[str, torch.Tensor] | None = None
        if not self.path.is_file():
            raise InputError(
                f"{what}: file not found: {self.path}",
                hint="check the path, or that the copy or download finished",
            )
        if self.path.suffix == ".pt":
            self._pt = self._load_pt()
        else:
            self._st = self._open_safetensors()

    def _open_safetensors(self) -> Any:
        try:
            return safe_open(str(self.path), framework="pt", device="cpu")
        except SafetensorError as exc:
            detail = str(exc)
            if "not fully covered" in detail or "too small" in detail:
                why = "the file is truncated (its header promises more bytes than it has)"
                hint = "copy the file again; compare its size and sha256 with the source"
            else:
                why = f"not a valid safetensors file ({detail})"
                hint = "the file must be written by safetensors (save_file / save_model)"
            raise InputError(f"{self.what}: cannot read {self.path}: {why}", hint=hint) from None
        except OSError as exc:
            raise InputError(
                f"{self.what}: cannot open {self.path}: {exc.strerror or exc}"
            ) from None

    def _load_pt(self) -> dict[str, torch.Tensor]:
        try:
            obj = torch.load(str(self.path), map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as exc:
            raise InputError(
                f"{self.what}: refusing {self.path}: {pt_refusal(exc)}",
                hint="it is loaded only with torch.load(weights_only=True); save a dict of "
                "plain tensors (torch.save({'input_ids': ..., ...})) or use safetensors",
            ) from None
        except (RuntimeError, EOFError, OSError, ValueError) as exc:
            hint = "copy the file again, or convert it to safetensors"
            raise pt_unreadable(self.what, self.path, exc, hint) from None
        if not isinstance(obj, dict) or not all(
            isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in obj.items()
        ):
            raise InputError(
                f"{self.what}: {self.path} holds a {type(obj).__name__}, "
                "expected a dict of tensor name to tensor"
            )
        return obj

    def keys(self) -> list[str]:
        return list(self._pt) if self._pt is not None else list(self._st.keys())

    def __contains__(self, key: str) -> bool:
        return key in self.keys()

    def shape(self, key: str) -> tuple[int, ...]:
        if self._pt is not None:
            return tuple(self._pt[key].shape)
        return tuple(self._st.get_slice(key).get_shape())

    def dtype(self, key: str) -> str:
        """The safetensors name of the tensor's dtype ("F32", "BF16", "I64", ...)."""
        if self._pt is not None:
            return DTYPE_NAMES.get(self._pt[key].dtype, str(self._pt[key].dtype))
        return str(self._st.get_slice(key).get_dtype())

    def get(self, key: str, rows: int | None = None) -> torch.Tensor:
        """Read one tensor (only its first ``rows`` rows when given) onto the CPU."""
        if self._pt is not None:
            tensor = self._pt[key]
            return tensor[:rows] if rows is not None else tensor
        try:
            if rows is not None:
                return self._st.get_slice(key)[:rows]
            return self._st.get_tensor(key)
        except SafetensorError as exc:
            raise InputError(
                f"{self.what}: cannot read tensor {key!r} from {self.path}: {exc}"
            ) from None


class ModelFiles:
    """A model directory: ``model.safetensors`` or shards named by ``model.safetensors.index.json``.

    Shards are opened only when one of their tensors is asked for.
    """

    INDEX = "model.safetensors.index.json"
    SINGLE = "model.safetensors"

    def __init__(self, directory: Path, what: str):
        self.dir = Path(directory)
        self.what = what
        self._files: dict[str, TensorFile] = {}
        index = self.dir / self.INDEX
        single = self.dir / self.SINGLE
        if index.is_file():
            self.weight_map = self._read_index(index)
        elif single.is_file():
            self.weight_map = dict.fromkeys(self._file(self.SINGLE).keys(), self.SINGLE)
        else:
            raise InputError(
                f"{what}: no weights in {self.dir}",
                hint=f"expected {self.SINGLE}, or shards listed in {self.INDEX}",
            )

    def _read_index(self, index: Path) -> dict[str, str]:
        try:
            data = json.loads(index.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"{self.what}: cannot parse {index}: {exc}") from None
        weight_map = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(weight_map, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()
        ):
            raise InputError(
                f'{self.what}: {index} has no "weight_map" object of tensor name to shard file'
            )
        return weight_map

    def _file(self, name: str) -> TensorFile:
        if name not in self._files:
            self._files[name] = TensorFile(self.dir / name, self.what)
        return self._files[name]

    def keys(self) -> list[str]:
        return list(self.weight_map)

    def __iter__(self) -> Iterator[str]:
        return iter(self.weight_map)

    def __contains__(self, key: str) -> bool:
        return key in self.weight_map

    def file_of(self, key: str) -> TensorFile:
        """The opened file holding ``key``; InputError when the index points at a bad shard."""
        tf = self._file(self.weight_map[key])
        if key not in tf:
            raise InputError(
                f"{self.what}: {self.INDEX} says {key!r} is in {self.weight_map[key]}, "
                f"but that file has no such tensor",
                hint="the shards and the index come from different saves; copy the directory again",
            )
        return tf

    def shape(self, key: str) -> tuple[int, ...]:
        return self.file_of(key).shape(key)

    def dtype(self, key: str) -> str:
        return self.file_of(key).dtype(key)

    def get(self, key: str) -> torch.Tensor:
        return self.file_of(key).get(key)
