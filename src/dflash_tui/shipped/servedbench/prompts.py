"""The suite's prompts as its cache holds them, read without torch.

A ``dflash-cache/1`` sample file is safetensors: an 8-byte little-endian header
length, a JSON header naming each tensor's dtype, shape and byte range, then the
bytes. Only ``input_ids`` and ``loss_mask`` are read (by seeking, so the large
``hidden_states`` never is). A sample's prompt is its ids before the first
``loss_mask == 1`` position, its ``max_tokens`` the rest: the target's own
greedy continuation that the cache was built from. Samples with one name make
one task, as the harness scores them.
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..common.errors import InputError

_INT_FORMATS = {"I64": "q", "I32": "i", "I16": "h", "I8": "b", "U8": "B", "BOOL": "?"}
MAX_HEADER = 100 * 1024 * 1024


@dataclass(frozen=True)
class Prompt:
    """One request of the bench: a cached sample's prompt and its continuation length."""

    task: str
    sample: str
    input_ids: tuple[int, ...]
    max_tokens: int


def read_ints(path: Path, names: tuple[str, ...]) -> dict[str, list[int]]:
    """The integer tensors `names` of the safetensors file `path`, flattened."""
    try:
        with path.open("rb") as f:
            raw = f.read(8)
            if len(raw) != 8:
                raise InputError(f"cache sample {path}: not a safetensors file (too short)")
            (length,) = struct.unpack("<Q", raw)
            if length > MAX_HEADER:
                raise InputError(f"cache sample {path}: not a safetensors file (header size)")
            header = json.loads(f.read(length))
            base = 8 + length
            out: dict[str, list[int]] = {}
            for name in names:
                info = header.get(name)
                if not isinstance(info, dict):
                    raise InputError(f"cache sample {path}: no tensor {name!r}")
                code = _INT_FORMATS.get(info.get("dtype", ""))
                if code is None:
                    raise InputError(
                        f"cache sample {path}: {name} is {info.get('dtype')}, expected integers"
                    )
                start, end = info["data_offsets"]
                f.seek(base + start)
                data = f.read(end - start)
                count = len(data) // struct.calcsize(code)
                out[name] = [int(v) for v in struct.unpack(f"<{count}{code}", data)]
            return out
    except OSError as exc:
        raise InputError(f"cache sample {path}: cannot read it ({exc.strerror or exc})") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"cache sample {path}: not a safetensors file ({exc})") from None


def read_prompts(cache: Path) -> list[Prompt]:
    """Every sample of the cache at `cache` as a request, in the manifest's order."""
    manifest = cache / "manifest.json"
    try:
        doc = json.loads(manifest.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(
            f"cache {cache}: cannot read manifest.json ({exc})",
            hint="a served bench needs the suite's dflash-cache/1 cache on its host",
        ) from None
    samples = doc.get("samples") if isinstance(doc, dict) else None
    if not isinstance(samples, list) or not samples:
        raise InputError(f"cache {manifest}: no samples listed")
    prompts = []
    for entry in samples:
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
            raise InputError(f"cache {manifest}: a sample entry without a file: {entry!r}")
        name = str(entry.get("name", entry["file"]))
        tensors = read_ints(cache / entry["file"], ("input_ids", "loss_mask"))
        ids, mask = tensors["input_ids"], tensors["loss_mask"]
        start = next((i for i, m in enumerate(mask) if m), None)
        if start is None or start == 0:
            raise InputError(
                f"cache sample {cache / entry['file']}: loss_mask marks no continuation after "
                "a prompt, so it has no prompt to send"
            )
        prompts.append(Prompt(name, entry["file"], tuple(ids[:start]), len(ids) - start))
    return prompts


def prompts_sha256(prompts: list[Prompt]) -> str:
    """A hash of what is sent (ids and max_tokens, in order): rows with another are unlike."""
    text = json.dumps([[p.task, list(p.input_ids), p.max_tokens] for p in prompts])
    return hashlib.sha256(text.encode()).hexdigest()


def named_target(manifest: object) -> tuple[str, bool] | None:
    """The target a parsed manifest.json names, and whether that path is relative to the
    cache: its `target` (True), else the cache builder's record `built_by.target` (False)."""
    if not isinstance(manifest, dict):
        return None
    if isinstance(manifest.get("target"), str):
        return manifest["target"], True
    built = manifest.get("built_by")
    if isinstance(built, dict) and isinstance(built.get("target"), str):
        return built["target"], False
    return None


def protocol_of(cache: Path) -> dict[str, Any] | None:
    """The cache's `protocol` block (a `--dataset` build: docs/evals.md "The protocol") in
    the fields the board compares, the sample ids as a hash; None when it has none."""
    try:
        doc = json.loads((cache / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    block = doc.get("protocol") if isinstance(doc, dict) else None
    if not isinstance(block, dict):
        return None
    ids = json.dumps(block.get("sample_ids"), separators=(",", ":"))
    kept = ("dataset", "config", "split", "rows_sha256", "formatter", "selection", "thinking")
    return {
        **{k: block.get(k) for k in kept},
        "chat_template_sha256": block.get("chat_template_sha256"),
        "max_new_tokens": block.get("max_new_tokens"),
        "samples": len(block.get("sample_ids") or ()),
        "samples_sha256": hashlib.sha256(ids.encode()).hexdigest(),
    }


def target_of(cache: Path) -> str | None:
    """The target model the cache was built from (`named_target`); None when it names none."""
    try:
        doc = json.loads((cache / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    named = named_target(doc)
    if named is None:
        return None
    path, in_cache = named
    return str((cache / path).resolve()) if in_cache else path


def draft_length(drafter: Path) -> int | None:
    """k from the drafter's config.json: its block size minus one (the anchor's slot)."""
    try:
        doc = json.loads((drafter / "config.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    found = doc.get("dflash_config")
    inner: dict[str, Any] = found if isinstance(found, dict) else {}
    block = doc.get("block_size", inner.get("block_size"))
    return block - 1 if isinstance(block, int) and block > 1 else None
