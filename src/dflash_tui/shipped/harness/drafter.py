"""The drafter checkpoint on disk (docs/design.md "Drafter checkpoint"): its config.json and its weights.

What the config and the tensors must satisfy lives in `rules.py`, shared with
the console's ``inspect`` and eval preflight; this module reads the files.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch

from .errors import InputError, Problems
from .rules import (
    FULL,
    OPTIONAL_BIASES,
    SLIDING,
    DrafterConfig,
    Shapes,
    fc_width,
    parse_config,
    tensor_problems,
    weight_shapes,
)
from .tensors import ModelFiles

__all__ = ["FULL", "SLIDING", "DrafterConfig", "DrafterFiles", "parse_config", "weight_shapes"]


def read_config(drafter_dir: Path) -> tuple[DrafterConfig, str]:
    """Parse ``config.json``; returns the config and the sha256 of the file's bytes."""
    path = Path(drafter_dir) / "config.json"
    if not Path(drafter_dir).is_dir():
        raise InputError(f"drafter: not a directory: {drafter_dir}")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(
            f"drafter: {path} not found",
            hint="a z-lab drafter directory holds config.json and model.safetensors",
        ) from None
    except OSError as exc:
        raise InputError(f"drafter: cannot read {path}: {exc.strerror or exc}") from None
    try:
        raw = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"drafter: {path} is not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise InputError(f"drafter: {path} holds a JSON {type(raw).__name__}, expected an object")
    return parse_config(raw, str(path)), hashlib.sha256(data).hexdigest()


class DrafterFiles:
    """A drafter directory opened for checking: config plus lazily read weights."""

    def __init__(self, drafter_dir: Path):
        self.dir = Path(drafter_dir)
        self.config, self.config_sha256 = read_config(self.dir)
        self.files = ModelFiles(self.dir, f"drafter {self.dir}")
        self._prefix = ""
        if "fc.weight" not in self.files and "model.fc.weight" in self.files:
            self._prefix = "model."  # saved from a wrapper module

    def key(self, name: str) -> str:
        return self._prefix + name

    def shapes(self) -> Shapes:
        """Every tensor's (dtype, shape), from the safetensors headers."""
        return {k: (self.files.dtype(k), tuple(self.files.shape(k))) for k in self.files}

    def fc_width(self) -> int | None:
        """Input width of ``fc.weight`` (feature layers x hidden size), None when absent."""
        return fc_width(self.shapes())

    def check_weights(self, problems: Problems) -> None:
        """Add a problem per config field the tensors contradict, missing tensor, wrong shape
        and unsupported dtype (`rules.tensor_problems`, as inspect and the preflight)."""
        tensor_problems(self.config, self.shapes(), str(self.dir), problems)

    def load(self, device: torch.device, dtype: torch.dtype) -> dict[str, torch.Tensor]:
        """Read the weights the forward needs (plus optional attention biases) onto ``device``."""
        names = list(weight_shapes(self.config))
        for i in range(self.config.num_layers):
            for proj in OPTIONAL_BIASES:
                bias = f"layers.{i}.self_attn.{proj}.bias"
                if self.key(bias) in self.files:
                    names.append(bias)
        return {n: self.files.get(self.key(n)).to(device=device, dtype=dtype) for n in names}
