"""Just enough of the Arrow IPC stream format to read integer-list columns.

vllm-project/speculators keeps each sample's ``loss_mask`` not in its hidden
state file but in the preprocessed dataset next to it, which ``datasets``
writes with ``save_to_disk``: ``state.json`` naming ``data-NNNNN-of-NNNNN.arrow``
shards, each an Arrow IPC *stream* (schema message, then record batches).
The harness may import only the standard library, torch and safetensors, so
this module parses the stream's flatbuffer metadata itself and reads the
columns the harness needs (lists of integers or booleans), uncompressed, as
``datasets`` writes them. Anything else is refused with a message.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

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


def _messages(path: Path) -> list[tuple[_Table, bytes]]:
    """Every (message, body) of an IPC stream file."""
    data = path.read_bytes()
    out, pos = [], 0
    if data[:6] == b"ARROW1":
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
        meta = data[pos : pos + size]
        pos += size
        msg = _Table(meta, struct.unpack_from("<I", meta, 0)[0])
        body_len = msg.scalar(3, "q")
        if pos + body_len > len(data):
            raise InputError(f"{path}: truncated Arrow stream (a record batch runs past the end)")
        out.append((msg, data[pos : pos + body_len]))
        pos += body_len
    return out


def _bits(buf: bytes, offset: int, n: int) -> list[int]:
    return [(buf[(offset + i) >> 3] >> ((offset + i) & 7)) & 1 for i in range(n)]


def _int_values(field: _Field, body: bytes, buffer: tuple[int, int], n: int) -> list[int]:
    start, _length = buffer
    if field.type_id == T_BOOL:
        return _bits(body, start * 8, n)
    assert field.type is not None
    width, signed = field.type.scalar(0, "i"), field.type.scalar(1, "?")
    code = {8: "b", 16: "h", 32: "i", 64: "q"}[width]
    code = code if signed else code.upper()
    return list(struct.unpack_from(f"<{n}{code}", body, start))


def _read_list_column(
    path: Path, field: _Field, nodes: list[tuple[int, int]], buffers: list, body: bytes
) -> list[list[int]]:
    """Rows of a list<int|bool> column, given its two nodes and four buffers."""
    (rows, nulls), (n_values, _) = nodes[0], nodes[1]
    if nulls:
        raise InputError(f"{path}: column {field.name!r} has null rows")
    off_fmt = "q" if field.type_id == T_LARGE_LIST else "i"
    offsets = struct.unpack_from(f"<{rows + 1}{off_fmt}", body, buffers[1][0])
    values = _int_values(field.children[0], body, buffers[3], n_values)
    base = offsets[0] if offsets[-1] > n_values else 0  # offsets of a slice not rebased
    return [values[offsets[r] - base : offsets[r + 1] - base] for r in range(rows)]


def _count(field: _Field) -> tuple[int, int]:
    """(nodes, buffers) a field and its children take in a record batch."""
    if field.type_id not in _BUFFERS:
        raise KeyError(field.type_id)
    nodes, buffers = 1, _BUFFERS[field.type_id]
    for child in field.children:
        n, b = _count(child)
        nodes, buffers = nodes + n, buffers + b
    return nodes, buffers


def read_int_lists(path: Path, names: tuple[str, ...]) -> dict[str, list[list[int]]]:
    """The rows of the named list<integer or bool> columns of one IPC stream file."""
    path = Path(path)
    try:
        messages = _messages(path)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not an Arrow IPC stream ({exc})") from None
    if not messages or messages[0][0].scalar(1, "B") != HEADER_SCHEMA:
        raise InputError(f"{path}: not an Arrow IPC stream (no schema message first)")
    schema = messages[0][0].table(2)
    assert schema is not None
    fields = [_field(t) for t in schema.tables(1)]
    by_name = {f.name: i for i, f in enumerate(fields)}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise InputError(
            f"{path}: no column(s) {', '.join(missing)} (columns: {', '.join(by_name)})"
        )
    for n in names:
        f = fields[by_name[n]]
        if f.type_id not in (T_LIST, T_LARGE_LIST) or f.children[0].type_id not in (T_INT, T_BOOL):
            raise InputError(f"{path}: column {n!r} is not a list of integers")
    out: dict[str, list[list[int]]] = {n: [] for n in names}
    for msg, body in messages[1:]:
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
                hint="datasets writes them uncompressed; rewrite with save_to_disk",
            )
        nodes = batch.structs(1, "qq")
        buffers = batch.structs(2, "qq")
        node_at = buffer_at = 0
        for f in fields:
            try:
                n_nodes, n_buffers = _count(f)
            except KeyError as exc:
                if all(by_name[n] < fields.index(f) for n in names):
                    break  # everything wanted is read already
                raise InputError(
                    f"{path}: column {f.name!r} has an Arrow type ({exc}) this reader cannot skip"
                ) from None
            if f.name in out:
                out[f.name].extend(
                    _read_list_column(
                        path,
                        f,
                        nodes[node_at : node_at + n_nodes],
                        buffers[buffer_at : buffer_at + n_buffers],
                        body,
                    )
                )
            node_at, buffer_at = node_at + n_nodes, buffer_at + n_buffers
    return out


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


def read_dataset_columns(dataset_dir: Path, names: tuple[str, ...]) -> dict[str, list[list[int]]]:
    """The named list columns of a whole ``save_to_disk`` dataset, rows in order."""
    out: dict[str, list[list[int]]] = {n: [] for n in names}
    for f in dataset_files(dataset_dir):
        part = read_int_lists(f, names)
        for n in names:
            out[n].extend(part[n])
    return out
