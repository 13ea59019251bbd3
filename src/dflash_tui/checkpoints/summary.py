"""Checkpoint summaries from safetensors headers and config.json, local or over SSH.

Only headers cross the network: a safetensors file starts with an 8-byte
little-endian header length and a JSON header naming every tensor's dtype,
shape and byte range, which is all a summary needs. The remote side reads
exactly `8 + header_len` bytes of each weight file, so inspecting a 3 GB
checkpoint costs kilobytes. Weight hashes (`sha256=True`) are computed on the
host that holds the files.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dflash_tui.remote.command import shell_script
from dflash_tui.remote.pool import HostPool

MAX_HEADER_BYTES = 100 * 1024 * 1024
MAX_CONFIG_BYTES = 4 * 1024 * 1024
DTYPE_BYTES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
    "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "U16": 2, "U32": 4, "U64": 8,
}  # fmt: skip
DFLASH_FIELDS = ("block_size", "mask_token_id", "target_layer_ids", "num_target_layers")


class CheckpointError(Exception):
    """A checkpoint cannot be read or is malformed; names the place and the problem."""


@dataclass(frozen=True)
class Location:
    """A directory on a host (`host=None` means this machine)."""

    host: str | None
    path: str

    def __str__(self) -> str:
        return f"{self.host}:{self.path}" if self.host else self.path


def parse_location(text: str) -> Location:
    """`host:path` or a local path (anything with '/' before the first ':' is local, as with scp)."""
    head, sep, tail = text.partition(":")
    if sep and head and "/" not in head:
        return Location(head, tail or ".")
    return Location(None, text)


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    shape: tuple[int, ...]
    file: str

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class WeightFile:
    name: str
    size_bytes: int
    header_bytes: int
    sha256: str | None = None


@dataclass(frozen=True)
class CheckpointSummary:
    """What `inspect` prints; built from headers and config.json only."""

    location: str
    config: Mapping[str, Any]
    files: tuple[WeightFile, ...]
    tensors: tuple[TensorInfo, ...]
    config_sha256: str | None
    bytes_read: int
    kind: str  # "drafter", "target" or "unknown"
    problems: tuple[str, ...] = ()

    @property
    def unscorable(self) -> list[str]:
        """For a drafter, the config fields the eval harness refuses to score, one line each
        (the harness's own check, `shipped/harness/refusals.py`, which needs no torch)."""
        if self.kind != "drafter":
            return []
        from dflash_tui.shipped.harness.refusals import unsupported_fields

        return unsupported_fields(dict(self.config))

    def setting(self, name: str) -> Any:
        """A config value from the top level or `dflash_config`, else (a multimodal target)
        from `text_config` / `language_config`."""
        value = config_value(self.config, name)
        return value if value is not None else target_value(self.config, name)[0]

    @property
    def parameters(self) -> int:
        return sum(t.numel for t in self.tensors)

    @property
    def weight_bytes(self) -> int:
        return sum(f.size_bytes for f in self.files)

    @property
    def dtypes(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for t in self.tensors:
            counts[t.dtype] = counts.get(t.dtype, 0) + t.numel
        return counts

    @property
    def layers(self) -> int | None:
        configured = self.setting("num_hidden_layers")
        if isinstance(configured, int):
            return configured
        found = {
            int(m.group(1))
            for t in self.tensors
            if (m := re.match(r"(?:model\.)?layers\.(\d+)\.", t.name))
        }
        return len(found) or None

    def shapes(self) -> dict[str, tuple[str, tuple[int, ...]]]:
        return {t.name: (t.dtype, t.shape) for t in self.tensors}

    def as_dict(self) -> dict[str, Any]:
        return {
            "location": self.location,
            "kind": self.kind,
            "parameters": self.parameters,
            "weight_bytes": self.weight_bytes,
            "dtypes": self.dtypes,
            "layers": self.layers,
            "hidden_size": self.setting("hidden_size"),
            "block_size": self.setting("block_size"),
            "target_layer_ids": self.setting("target_layer_ids"),
            "mask_token_id": self.setting("mask_token_id"),
            "vocab_size": self.setting("vocab_size"),
            "config_sha256": self.config_sha256,
            "files": [asdict(f) for f in self.files],
            "tensors": len(self.tensors),
            "bytes_read": self.bytes_read,
            "problems": list(self.problems),
            "unscorable": self.unscorable,
        }


def config_value(config: Mapping[str, Any], name: str) -> Any:
    if name in config:
        return config[name]
    inner = config.get("dflash_config")
    if isinstance(inner, Mapping) and name in inner:
        return inner[name]
    return None


# Multimodal targets (Qwen3.5/3.6 `*ForConditionalGeneration`) keep the language model's
# sizes in a nested table; the drafter sits on that language model.
TEXT_CONFIG_KEYS = ("text_config", "language_config")


def target_value(config: Mapping[str, Any], name: str) -> tuple[Any, str | None]:
    """A target model's config value and where it was found: the top level first, then
    `text_config` / `language_config`; (None, None) when none of them has it."""
    if config.get(name) is not None:
        return config[name], name
    for key in TEXT_CONFIG_KEYS:
        inner = config.get(key)
        if isinstance(inner, Mapping) and inner.get(name) is not None:
            return inner[name], f"{key}.{name}"
    return None, None


# --------------------------------------------------------------------------- parsing


def _json(raw: bytes, problem: Callable[[ValueError], str]) -> Any:
    """`raw` parsed as JSON, or CheckpointError(`problem(why not)`): a checkpoint's
    header, config.json and index are read the same way."""
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(problem(exc)) from None


def parse_header(raw: bytes, file: str, where: str) -> list[TensorInfo]:
    """Tensors of one safetensors header (the JSON after the length prefix)."""
    header = _json(
        raw, lambda e: f"{where}/{file}: not a safetensors file (header is not JSON: {e})"
    )
    if not isinstance(header, dict):
        raise CheckpointError(
            f"{where}/{file}: not a safetensors file (header is not a JSON object)"
        )
    tensors = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            shape = info["shape"]
            # safetensors' own reader wants whole numbers >= 0 (inf, 1.5, "12", true are not)
            if not all(type(x) is int and x >= 0 for x in shape):
                raise ValueError(shape)
            tensors.append(TensorInfo(name, str(info["dtype"]), tuple(shape), file))
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(
                f"{where}/{file}: tensor {name!r} has no valid dtype/shape"
            ) from None
    return tensors


def _kind(config: Mapping[str, Any], tensors: Sequence[TensorInfo]) -> str:
    if any(config_value(config, f) is not None for f in DFLASH_FIELDS) or any(
        t.name == "fc.weight" for t in tensors
    ):
        return "drafter"
    if (
        any(t.name.endswith("embed_tokens.weight") for t in tensors)
        or target_value(config, "num_hidden_layers")[0] is not None
    ):
        return "target"
    return "unknown"


def weight_file_names(listing: Sequence[str], index: Mapping[str, Any] | None) -> list[str]:
    if index is not None:
        weight_map = index.get("weight_map", {})
        return sorted(set(weight_map.values())) if isinstance(weight_map, dict) else []
    return sorted(n for n in listing if n.endswith(".safetensors"))


def build_summary(
    where: str,
    config_raw: bytes | None,
    index_raw: bytes | None,
    files: Sequence[tuple[str, int, bytes | None, str | None]],
    bytes_read: int,
) -> CheckpointSummary:
    problems: list[str] = []
    config: dict[str, Any] = {}
    if config_raw is None:
        problems.append("no config.json")
    else:
        loaded = _json(config_raw, lambda e: f"{where}/config.json: not valid JSON ({e})")
        config = loaded if isinstance(loaded, dict) else {}
    tensors: list[TensorInfo] = []
    weight_files = []
    for name, size, header, digest in files:
        if header is None:
            problems.append(f"{name}: missing")
            continue
        tensors.extend(parse_header(header, name, where))
        weight_files.append(WeightFile(name, size, len(header), digest))
        data_bytes = size - 8 - len(header)
        declared = sum(t.numel * DTYPE_BYTES.get(t.dtype, 0) for t in tensors if t.file == name)
        if data_bytes < declared:
            problems.append(
                f"{name}: truncated ({data_bytes} data bytes, header declares {declared})"
            )
    if not files:
        problems.append("no *.safetensors weights")
    del index_raw  # the shard list already came from it
    kind = _kind(config, tensors)
    if kind == "drafter" and config:
        problems.extend(drafter_rule_problems(config, tensors, where))
    return CheckpointSummary(
        location=where,
        config=config,
        files=tuple(weight_files),
        tensors=tuple(tensors),
        config_sha256=hashlib.sha256(config_raw).hexdigest() if config_raw is not None else None,
        bytes_read=bytes_read,
        kind=kind,
        problems=tuple(problems),
    )


def drafter_rule_problems(
    config: Mapping[str, Any], tensors: Sequence[TensorInfo], where: str
) -> list[str]:
    """The harness's own rules (`shipped/harness/rules.py`) for a drafter's config against its
    tensors: hidden, heads, kv heads, head_dim, intermediate, layers, fc width against the
    layer ids. Fields the harness refuses outright are left to `unscorable`."""
    from dflash_tui.shipped.harness.refusals import unsupported_fields
    from dflash_tui.shipped.harness.rules import drafter_problems

    shapes = {t.name: (t.dtype, t.shape) for t in tensors}
    _, found = drafter_problems(config, shapes, where)
    refused = set(unsupported_fields(dict(config)))
    return [line for line in found.items if line not in refused]


# --------------------------------------------------------------------------- local


def _read_local_header(path: Path) -> tuple[bytes, int]:
    with path.open("rb") as handle:
        prefix = handle.read(8)
        if len(prefix) < 8:
            raise CheckpointError(f"{path}: not a safetensors file (shorter than 8 bytes)")
        (length,) = struct.unpack("<Q", prefix)
        if length > MAX_HEADER_BYTES:
            raise CheckpointError(
                f"{path}: not a safetensors file (header length {length} is implausible)"
            )
        header = handle.read(length)
        if len(header) < length:
            raise CheckpointError(f"{path}: truncated safetensors header")
    return header, 8 + length


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(4 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def inspect_local(path: str, *, sha256: bool = False) -> CheckpointSummary:
    """Summarise a checkpoint directory (or a single .safetensors file) on this machine."""
    root = Path(path).expanduser()
    if not root.exists():
        raise CheckpointError(f"{root}: no such file or directory")
    folder = root if root.is_dir() else root.parent
    listing = [root.name] if root.is_file() else sorted(os.listdir(root))
    bytes_read = 0

    def read_small(name: str) -> bytes | None:
        nonlocal bytes_read
        candidate = folder / name
        if not candidate.is_file():
            return None
        data = candidate.read_bytes()[:MAX_CONFIG_BYTES]
        bytes_read += len(data)
        return data

    config_raw = read_small("config.json")
    index_raw = read_small("model.safetensors.index.json") if root.is_dir() else None
    index = load_index(index_raw, str(folder))
    files: list[tuple[str, int, bytes | None, str | None]] = []
    for name in weight_file_names(listing, index):
        file = folder / name
        if not file.is_file():
            files.append((name, 0, None, None))
            continue
        header, n = _read_local_header(file)
        bytes_read += n
        files.append((name, file.stat().st_size, header, _sha256_file(file) if sha256 else None))
    return build_summary(str(root), config_raw, index_raw, files, bytes_read)


def load_index(raw: bytes | None, where: str) -> dict[str, Any] | None:
    if raw is None:
        return None
    loaded = _json(raw, lambda e: f"{where}/model.safetensors.index.json: not valid JSON ({e})")
    return loaded if isinstance(loaded, dict) else None


# --------------------------------------------------------------------------- remote

# Prints framed records for a checkpoint directory ($1) or one .safetensors file:
#   "F <kind> <name> <size> <n>\n" then n raw bytes, where kind is config, index or
#   header (the safetensors header JSON only); "M <name>" for a shard the index names
#   but the folder lacks; "H <name> <sha256>" with $2=1. Shard names come from the
#   index's weight_map values. Only the 8-byte prefix and the header of each weights
#   file are read.
_INSPECT_SCRIPT = r"""
set -u
p=$1; want_sha=$2; max_header=$3; max_small=$4
if [ -d "$p" ]; then dir=$p; only=; elif [ -f "$p" ]; then dir=$(dirname -- "$p"); only=$(basename -- "$p"); else echo "E no such file or directory: $p"; exit 3; fi
[ -r "$dir" ] || { echo "E permission denied: $dir"; exit 3; }
# a file's size from its inode (stat); wc only where stat fails (wc may read it all)
size() { stat -L -c %s -- "$1" 2>/dev/null || wc -c < "$1"; }
small() {
    f=$dir/$2
    [ -f "$f" ] || return 0
    s=$(size "$f")
    n=$s; [ "$n" -gt "$max_small" ] && n=$max_small
    printf 'F %s %s %s %s\n' "$1" "$2" "$s" "$n"
    head -c "$n" "$f"
}
small config config.json
if [ -z "$only" ]; then small index model.safetensors.index.json; fi
if [ -n "$only" ]; then names=$only
elif [ -f "$dir/model.safetensors.index.json" ]; then
    names=$(grep -o '"[^"/]*\.safetensors"' "$dir/model.safetensors.index.json" | tr -d '"' | sort -u)
else names=$(cd -- "$dir" && ls -1 | grep '\.safetensors$'); fi
printf '%s\n' "$names" | while IFS= read -r name; do
    [ -n "$name" ] || continue
    f=$dir/$name
    [ -f "$f" ] || { printf 'M %s\n' "$name"; continue; }
    s=$(size "$f")
    set -- $(od -An -tu1 -N8 -- "$f")
    if [ $# -lt 8 ]; then printf 'F header %s %s 0\n' "$name" "$s"; continue; fi
    n=$(( $1 + ($2 << 8) + ($3 << 16) + ($4 << 24) + ($5 << 32) + ($6 << 40) + ($7 << 48) + ($8 << 56) ))
    if [ "$n" -gt "$max_header" ] || [ "$n" -lt 0 ]; then printf 'X %s %s\n' "$name" "$n"; continue; fi
    printf 'F header %s %s %s\n' "$name" "$s" "$n"
    head -c $((8 + n)) -- "$f" | tail -c "$n"
    if [ "$want_sha" = 1 ]; then printf 'H %s %s\n' "$name" "$(sha256sum < "$f" | cut -d' ' -f1)"; fi
done
"""


async def inspect_remote(
    pool: HostPool, host: str, path: str, *, sha256: bool = False
) -> CheckpointSummary:
    """Summarise a checkpoint directory on `host` in one round trip, reading only headers there."""
    where = f"{host}:{path}"
    argv = shell_script(
        _INSPECT_SCRIPT, path, "1" if sha256 else "0", str(MAX_HEADER_BYTES), str(MAX_CONFIG_BYTES)
    )
    result = await pool.run(host, argv, encoding=None, check=False)
    _raise_script_error(result.stdout, where, result.exit_status)
    config_raw, index_raw, order, headers, digests = _parse_frames(result.stdout, where)
    files = [
        (name, headers[name][0], headers[name][1], digests.get(name))
        if name in headers
        else (name, 0, None, None)
        for name in order
    ]
    return build_summary(where, config_raw, index_raw, files, len(result.stdout))


def _raise_script_error(out: bytes, where: str, status: int | None) -> None:
    if out.startswith(b"E "):
        first = out[2:].split(b"\n", 1)[0].decode(errors="replace")
        raise CheckpointError(f"{where}: {first}")
    if status not in (0, None):
        raise CheckpointError(f"{where}: reading the checkpoint failed (exit status {status})")


def _frame_head(rest: str, line: str, where: str) -> tuple[str, str, int, int]:
    """`<kind> <name> <size> <n>` of an F record; a garbled one (the link cut it, or the
    host's shell is not the one the script expects) is a CheckpointError naming `where`."""
    kind, _, rest = rest.partition(" ")
    words = rest.rsplit(" ", 2)
    if len(words) == 3 and words[1].isascii() and words[1].isdigit():
        name, size, n = words
        if n.isascii() and n.isdigit():
            return kind, name, int(size), int(n)
    raise CheckpointError(f"{where}: unexpected output from the inspect script: {line[:120]!r}")


def _parse_frames(
    out: bytes, where: str
) -> tuple[bytes | None, bytes | None, list[str], dict[str, tuple[int, bytes]], dict[str, str]]:
    """Split the inspect script's output into config, index, weight-file order, headers, digests."""
    config_raw = index_raw = None
    order: list[str] = []
    headers: dict[str, tuple[int, bytes]] = {}
    digests: dict[str, str] = {}
    pos = 0
    while pos < len(out):
        end = out.find(b"\n", pos)
        if end < 0:
            break
        line = out[pos:end].decode("utf-8", "replace")
        pos = end + 1
        tag, _, rest = line.partition(" ")
        if tag == "F":
            kind, name, size, n = _frame_head(rest, line, where)
            data = out[pos : pos + n]
            pos += n
            if kind == "config":
                config_raw = data
            elif kind == "index":
                index_raw = data
            else:
                order.append(name)
                if len(data) < n or n == 0:
                    raise CheckpointError(f"{where}/{name}: truncated safetensors header")
                headers[name] = (size, data)
        elif tag == "H":
            name, _, digest = rest.rpartition(" ")
            digests[name] = digest
        elif tag == "M":
            order.append(rest)
        elif tag == "X":
            name, _, n_text = rest.rpartition(" ")
            raise CheckpointError(
                f"{where}/{name}: not a safetensors file (header length {n_text} is implausible)"
            )
    return config_raw, index_raw, order, headers, digests


# --------------------------------------------------------------------------- comparing


@dataclass(frozen=True)
class Comparison:
    """`inspect --against`: how two checkpoints (or a drafter and its target) relate."""

    kind: str  # "checkpoints" or "drafter-vs-target"
    compatible: bool
    same_shapes: bool | None = None
    same_bytes: bool | None = None
    differences: tuple[str, ...] = field(default_factory=tuple)
    # Checks that could not be made (a value missing from a config): said, never skipped silently.
    unchecked: tuple[str, ...] = field(default_factory=tuple)
    # The files known to differ (config.json by its sha256, weights by size or sha256):
    # why same_bytes is False.
    bytes_differ: tuple[str, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def compare(a: CheckpointSummary, b: CheckpointSummary) -> Comparison:
    """Two drafters: same tensors, shapes, dtypes, bytes. A drafter and a target: compatibility."""
    if {a.kind, b.kind} == {"drafter", "target"}:
        drafter, target = (a, b) if a.kind == "drafter" else (b, a)
        return _drafter_vs_target(drafter, target)
    differences = []
    sa, sb = a.shapes(), b.shapes()
    for name in sorted(set(sa) | set(sb)):
        if name not in sb:
            differences.append(f"{name}: only in {a.location}")
        elif name not in sa:
            differences.append(f"{name}: only in {b.location}")
        elif sa[name] != sb[name]:
            differences.append(
                f"{name}: {sa[name][0]}{list(sa[name][1])} vs {sb[name][0]}{list(sb[name][1])}"
            )
    same_shapes = not differences
    same_bytes, bytes_differ = _same_bytes(a, b)
    for key in (
        "hidden_size",
        "block_size",
        "target_layer_ids",
        "mask_token_id",
        "num_hidden_layers",
    ):
        va, vb = a.setting(key), b.setting(key)
        if va != vb:
            differences.append(f"config {key}: {va} vs {vb}")
    return Comparison(
        "checkpoints",
        same_shapes,
        same_shapes,
        same_bytes,
        tuple(differences),
        bytes_differ=bytes_differ,
    )


def _same_bytes(a: CheckpointSummary, b: CheckpointSummary) -> tuple[bool | None, tuple[str, ...]]:
    """Whether two checkpoints hold the same bytes, and the files known to differ.

    config.json's sha256 is always known (inspect reads it whole); a weight file differs
    when it is in one only, its sizes differ, or (with --sha256) its hashes do. Unknown
    (None) only when nothing differs so far and some weights were not hashed."""
    differ = []
    if a.config_sha256 != b.config_sha256:
        differ.append("config.json")
    files_a, files_b = {f.name: f for f in a.files}, {f.name: f for f in b.files}
    unhashed = False
    for name in sorted(files_a.keys() | files_b.keys()):
        fa, fb = files_a.get(name), files_b.get(name)
        if fa is None or fb is None or fa.size_bytes != fb.size_bytes:
            differ.append(name)
        elif fa.sha256 and fb.sha256:
            if fa.sha256 != fb.sha256:
                differ.append(name)
        else:
            unhashed = True
    if differ:
        return False, tuple(differ)
    return (None if unhashed else True), ()


def _drafter_vs_target(drafter: CheckpointSummary, target: CheckpointSummary) -> Comparison:
    problems: list[str] = []
    unchecked: list[str] = []
    where = f"{target.location}/config.json"
    looked = "top level, " + ", ".join(TEXT_CONFIG_KEYS)

    def missing_in_target(name: str, check: str) -> None:
        unchecked.append(f"{check}: not checked, {where} has no {name} (looked at the {looked})")

    def missing_in_drafter(name: str, check: str) -> None:
        unchecked.append(f"{check}: not checked, the drafter's config.json has no {name}")

    hd = drafter.setting("hidden_size")
    ht, ht_key = target_value(target.config, "hidden_size")
    if hd is None:
        missing_in_drafter("hidden_size", "hidden size")
    elif ht is None:
        missing_in_target("hidden_size", "hidden size")
    elif hd != ht:
        problems.append(f"hidden_size: drafter {hd}, target {ht} ({ht_key})")

    depth, depth_key = target_value(target.config, "num_hidden_layers")
    ids = drafter.setting("target_layer_ids")
    if ids is None:
        missing_in_drafter("target_layer_ids", "target layers")
    elif not isinstance(depth, int):
        missing_in_target("num_hidden_layers", "target layers")
    else:
        outside = [i for i in ids if not 0 <= int(i) < depth]
        if outside:
            problems.append(
                f"target_layer_ids {outside} outside the target's {depth} layers ({depth_key})"
            )

    vocab, vocab_key = target_value(target.config, "vocab_size")
    mask = drafter.setting("mask_token_id")
    if not isinstance(mask, int):
        missing_in_drafter("mask_token_id", "mask token")
    elif not isinstance(vocab, int):
        missing_in_target("vocab_size", "mask token")
    elif not 0 <= mask < vocab:
        problems.append(
            f"mask_token_id {mask} outside the target's vocab_size {vocab} ({vocab_key})"
        )
    return Comparison(
        "drafter-vs-target",
        not problems,
        differences=tuple(problems),
        unchecked=tuple(unchecked),
    )


# --------------------------------------------------------------------------- locate

# For each model root ($3...): directories (depth <= 4) whose name contains $1,
# one line each: size, mtime, fingerprint, path. The fingerprint hashes config.json
# and the weight files' names and sizes (or, with $2=1, their full sha256) so
# copies of the same checkpoint on different hosts match.
_LOCATE_SCRIPT = r"""
name=$1; full=$2; shift 2
for root in "$@"; do
    [ -d "$root" ] || continue
    find "$root" -maxdepth 4 -type d -iname "*$name*" 2>/dev/null | while IFS= read -r d; do
        size=$(du -sb -- "$d" 2>/dev/null | cut -f1)
        mtime=$(stat -c %Y -- "$d")
        fp=$(cd -- "$d" && {
            cat config.json 2>/dev/null
            for f in *.safetensors; do
                [ -f "$f" ] || continue
                if [ "$full" = 1 ]; then printf '%s %s\n' "$f" "$(sha256sum < "$f")"
                else printf '%s %s\n' "$f" "$(stat -L -c %s -- "$f" 2>/dev/null || wc -c < "$f")"; fi
            done
        } | sha256sum | cut -c1-16)
        printf '%s\t%s\t%s\t%s\n' "$size" "$mtime" "$fp" "$d"
    done
done
"""


@dataclass(frozen=True)
class Found:
    """One directory `locate` found; equal `fingerprint`s mean identical copies."""

    host: str
    path: str
    size_bytes: int
    modified: float
    fingerprint: str
    copy_group: str = ""
    place: str = "host"  # "host": `host` is a host; "store": a [stores.NAME], `path` under it

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
