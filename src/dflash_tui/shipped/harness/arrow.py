"""Just enough of the Arrow IPC stream format to read integer-list columns.

vllm-project/speculators keeps each sample's ``loss_mask`` not in its hidden
state file but in the preprocessed dataset next to it, which ``datasets``
writes with ``save_to_disk``: ``state.json`` naming ``data-NNNNN-of-NNNNN.arrow``
shards, each an Arrow IPC *stream* (schema message, then record batches).
The harness may import only the standard library, torch and safetensors, so
this module parses the stream's flatbuffer metadata itself and reads the
columns the harness needs (lists of integers or booleans), uncompressed, as
``datasets`` writes them. Anything else is refused with a message. The file is
memory-mapped and a row becomes a tensor only when asked for, so a large
training dataset costs little when a few of its rows have hidden states.
"""

from __future__ import annotations

import json
import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

import torch

from .errors import InputError

CONTINUATION = 0xFFFFFFFF
# Message.header union and Type union tags of the Arrow format (Message.fbs, Schema.fbs).
HEADER_SCHEMA, HEADER_DICTIONARY, HEADER_RECORD_BATCH = 1, 2, 3
T_NULL, T_INT, T_FLOAT, T_BINARY, T_UTF8, T_BOOL = 1, 2, 3, 4, 5, 6
T_DECIMAL, T_DATE, T_TIME, T_TIMESTAMP, T_INTERVAL = 7, 8, 9, 10, 11
T_LIST, T_STRUCT, T_FIXED_BINARY, T_FIXED_LIST, T_DURATION = 12, 13, 15, 16, 18
T_LARGE_BINARY, T_LARGE_UTF8, T_LARGE_LIST = 19, 20, 21
# buffers each type owns in a record batch (validity bitmap included)
_BUFFERS = {
    T_NULL: 0,
    T_INT: 2,
    T_FLOAT: 2,
    T_BOOL: 2,
    T_DECIMAL: 2,
    T_DATE: 2,
    T_TIME: 2,
    T_TIMESTAMP: 2,
    T_INTERVAL: 2,
    T_DURATION: 2,
    T_FIXED_BINARY: 2,
    T_BINARY: 3,
    T_UTF8: 3,
    T_LARGE_BINARY: 3,
    T_LARGE_UTF8: 3,
    T_LIST: 2,
    T_LARGE_LIST: 2,
    T_STRUCT: 1,
    T_FIXED_LIST: 1,
}


class _Table:
    """A flatbuffer table: fields by index through its vtable."""

    def __init__(self, buf: bytes, pos: int):
        self.buf, self.pos = buf, pos
        vtable = pos - struct.unpack_from("<i", buf, pos)[0]
        self.vt = vtable
        self.vt_len = struct.unpack_from("<H", buf, vtable)[0]

    def _field(self, i: int) -> int:
        slot = 4 + 2 * i
        if slot >= self.vt_len:
            return 0
        off = struct.unpack_from("<H", self.buf, self.vt + slot)[0]
        return self.pos + off if off else 0

    def scalar(self, i: int, fmt: str, default: int = 0) -> int:
        at = self._field(i)
        return struct.unpack_from("<" + fmt, self.buf, at)[0] if at else default

    def _target(self, i: int) -> int:
        at = self._field(i)
        return at + struct.unpack_from("<I", self.buf, at)[0] if at else 0

    def table(self, i: int) -> _Table | None:
        at = self._target(i)
        return _Table(self.buf, at) if at else None

    def string(self, i: int) -> str:
        at = self._target(i)
        if not at:
            return ""
        n = struct.unpack_from("<I", self.buf, at)[0]
        return self.buf[at + 4 : at + 4 + n].decode("utf-8", "replace")

    def vector(self, i: int) -> tuple[int, int]:
        """(start of the elements, count)."""
        at = self._target(i)
        if not at:
            return 0, 0
        return at + 4, struct.unpack_from("<I", self.buf, at)[0]

    def tables(self, i: int) -> list[_Table]:
        start, n = self.vector(i)
        out = []
        for k in range(n):
            at = start + 4 * k
            out.append(_Table(self.buf, at + struct.unpack_from("<I", self.buf, at)[0]))
        return out

    def structs(self, i: int, fmt: str) -> list[tuple[int, ...]]:
        start, n = self.vector(i)
        size = struct.calcsize("<" + fmt)
        return [struct.unpack_from("<" + fmt, self.buf, start + size * k) for k in range(n)]


@dataclass
class _Field:
    name: str
    type_id: int
    type: _Table | None
    children: list[_Field]


def _field(t: _Table) -> _Field:
    return _Field(
        name=t.string(0),
        type_id=t.scalar(2, "B"),
        type=t.table(3),
        children=[_field(c) for c in t.tables(5)],
    )


def _messages(data: memoryview, path: Path) -> list[tuple[_Table, int, int]]:
    """Every (message, body start, body length) of an IPC stream."""
    out, pos = [], 0
    if bytes(data[:6]) == b"ARROW1":
        raise InputError(
            f"{path}: an Arrow IPC *file* (random access); datasets writes the stream format",
            hint="point the cache at the directory that prepare_data.py / save_to_disk wrote",
        )
    while pos + 4 <= len(data):
        size = struct.unpack_from("<I", data, pos)[0]
        pos += 4
        if size == CONTINUATION:
            if pos + 4 > len(data):
                break
            size = struct.unpack_from("<I", data, pos)[0]
            pos += 4
        if size == 0:
            break  # end of stream
        if pos + size > len(data):
            raise InputError(f"{path}: truncated Arrow stream (metadata runs past the end)")
        meta = bytes(data[pos : pos + size])
        pos += size
        msg = _Table(meta, struct.unpack_from("<I", meta, 0)[0])
        body_len = msg.scalar(3, "q")
        if pos + body_len > len(data):
            raise InputError(f"{path}: truncated Arrow stream (a record batch runs past the end)")
        out.append((msg, pos, body_len))
        pos += body_len
    return out


_INT_DTYPES = {(8, True): torch.int8, (16, True): torch.int16, (32, True): torch.int32}
_INT_DTYPES.update({(64, True): torch.int64, (8, False): torch.uint8})


@dataclass
class _Chunk:
    """One record batch's slice of a list column: offsets and values, views of the file."""

    offsets: torch.Tensor  # int64 [rows + 1], from 0
    values: torch.Tensor  # the child's values; for bool, the bitmap bytes
    bit_base: int = -1  # >= 0 for a bool bitmap: the bit of value 0

    def row(self, r: int) -> torch.Tensor:
        start, end = int(self.offsets[r]), int(self.offsets[r + 1])
        if self.bit_base < 0:
            return self.values[start:end].to(torch.int64)
        bits = torch.arange(start, end, dtype=torch.int64) + self.bit_base
        return ((self.values[bits >> 3].to(torch.int64) >> (bits & 7)) & 1).to(torch.int64)


def _view(data: memoryview, start: int, dtype: torch.dtype, count: int) -> torch.Tensor:
    if count == 0:
        return torch.zeros(0, dtype=dtype)
    return torch.frombuffer(data, dtype=dtype, count=count, offset=start)


def _chunk(
    path: Path, field: _Field, nodes: list, buffers: list, data: memoryview, body: int
) -> _Chunk:
    (rows, nulls), (n_values, _) = nodes[0], nodes[1]
    if nulls:
        raise InputError(f"{path}: column {field.name!r} has null rows")
    off_dtype = torch.int64 if field.type_id == T_LARGE_LIST else torch.int32
    offsets = _view(data, body + buffers[1][0], off_dtype, rows + 1).to(torch.int64)
    child = field.children[0]
    # offsets of a sliced array that the writer did not rebase start past 0
    base = int(offsets[0]) if rows and int(offsets[-1]) > n_values else 0
    offsets = offsets - base
    values_at = body + buffers[3][0]
    if child.type_id == T_BOOL:
        return _Chunk(offsets, _view(data, values_at, torch.uint8, (n_values + 7) // 8), 0)
    assert child.type is not None
    key = (child.type.scalar(0, "i"), child.type.scalar(1, "?"))
    if key not in _INT_DTYPES:
        raise InputError(
            f"{path}: column {field.name!r} holds {key[0]}-bit integers of a kind "
            "this reader does not take"
        )
    return _Chunk(offsets, _view(data, values_at, _INT_DTYPES[key], n_values))


def _count(field: _Field) -> tuple[int, int]:
    """(nodes, buffers) a field and its children take in a record batch."""
    if field.type_id not in _BUFFERS:
        raise KeyError(field.type_id)
    nodes, buffers = 1, _BUFFERS[field.type_id]
    for child in field.children:
        n, b = _count(child)
        nodes, buffers = nodes + n, buffers + b
    return nodes, buffers


class ListColumns:
    """Integer-list columns of a dataset, by row; rows become int64 tensors on demand."""

    def __init__(self, names: tuple[str, ...]):
        self.names = names
        self._chunks: dict[str, list[tuple[int, _Chunk]]] = {n: [] for n in names}
        self._maps: list[mmap.mmap] = []
        self.rows = 0

    def __len__(self) -> int:
        return self.rows

    def row(self, name: str, i: int) -> torch.Tensor:
        if not 0 <= i < self.rows:
            raise IndexError(i)
        for start, chunk in reversed(self._chunks[name]):
            if i >= start:
                return chunk.row(i - start)
        raise IndexError(i)

    def add_file(self, path: Path) -> None:
        """Map one IPC stream file and index the named columns of its record batches."""
        path = Path(path)
        try:
            with open(path, "rb") as f:
                mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        except (OSError, ValueError) as exc:
            raise InputError(
                f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}"
            ) from None
        self._maps.append(mapped)
        data = memoryview(mapped)
        try:
            self._index(path, data)
        except (struct.error, IndexError, UnicodeDecodeError, RuntimeError) as exc:
            raise InputError(f"{path}: not a readable Arrow IPC stream ({exc})") from None

    def _index(self, path: Path, data: memoryview) -> None:
        messages = _messages(data, path)
        if not messages or messages[0][0].scalar(1, "B") != HEADER_SCHEMA:
            raise InputError(f"{path}: not an Arrow IPC stream (no schema message first)")
        schema = messages[0][0].table(2)
        assert schema is not None
        fields = [_field(t) for t in schema.tables(1)]
        by_name = {f.name: i for i, f in enumerate(fields)}
        missing = [n for n in self.names if n not in by_name]
        if missing:
            raise InputError(
                f"{path}: no column(s) {', '.join(missing)} (columns: {', '.join(by_name)})"
            )
        for n in self.names:
            f = fields[by_name[n]]
            if f.type_id not in (T_LIST, T_LARGE_LIST) or f.children[0].type_id not in (
                T_INT,
                T_BOOL,
            ):
                raise InputError(f"{path}: column {n!r} is not a list of integers")
        last_wanted = max(by_name[n] for n in self.names)
        for msg, body, _length in messages[1:]:
            kind = msg.scalar(1, "B")
            if kind == HEADER_DICTIONARY:
                continue
            if kind != HEADER_RECORD_BATCH:
                raise InputError(f"{path}: unexpected Arrow message type {kind}")
            batch = msg.table(2)
            assert batch is not None
            if batch.table(3) is not None:
                raise InputError(
                    f"{path}: compressed Arrow record batches are not supported",
                    hint="datasets writes them uncompressed; save the dataset again",
                )
            nodes, buffers = batch.structs(1, "qq"), batch.structs(2, "qq")
            node_at = buffer_at = 0
            for f in fields[: last_wanted + 1]:
                try:
                    n_nodes, n_buffers = _count(f)
                except KeyError as exc:
                    raise InputError(
                        f"{path}: column {f.name!r} has an Arrow type ({exc}) this reader "
                        "cannot skip"
                    ) from None
                if f.name in self._chunks:
                    chunk = _chunk(
                        path,
                        f,
                        nodes[node_at : node_at + n_nodes],
                        buffers[buffer_at : buffer_at + n_buffers],
                        data,
                        body,
                    )
                    self._chunks[f.name].append((self.rows, chunk))
                node_at, buffer_at = node_at + n_nodes, buffer_at + n_buffers
            self.rows += batch.scalar(0, "q")


def dataset_files(dataset_dir: Path) -> list[Path]:
    """The shard files of a ``save_to_disk`` directory, in row order (from state.json)."""
    state = dataset_dir / "state.json"
    try:
        raw = json.loads(state.read_text())
        files = [dataset_dir / entry["filename"] for entry in raw["_data_files"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(
            f"{state}: cannot read the dataset's shard list ({exc})",
            hint="a datasets save_to_disk directory holds state.json and data-*.arrow",
        ) from None
    for f in files:
        if not f.is_file():
            raise InputError(f"{state} names {f.name}, which is missing")
    return files


def read_dataset_columns(dataset_dir: Path, names: tuple[str, ...]) -> ListColumns:
    """The named integer-list columns of a ``save_to_disk`` dataset, rows in order."""
    columns = ListColumns(names)
    for f in dataset_files(dataset_dir):
        columns.add_file(f)
    return columns
