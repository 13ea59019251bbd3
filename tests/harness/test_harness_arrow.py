"""The harness's own Arrow IPC stream reader against files pyarrow writes.

speculators keeps loss masks in a `datasets` dataset; the harness reads its
list columns without pyarrow on the host, so the reader is held here to what
pyarrow writes: other columns before the wanted ones (nested, strings), bool and
int32 lists, several record batches, sliced tables, several shard files.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from dflash_tui.shipped.harness.arrow import read_dataset_columns
from dflash_tui.shipped.harness.errors import InputError

ROWS = {
    "messages": [[{"role": "user", "content": "héllo"}], [], [{"role": "a", "content": ""}]],
    "input_ids": [[1, 2, 3], [4, 5], [2**40]],
    "loss_mask": [[False, True, True], [True, False], [True]],
    "small": [[-1, 7], [], [3]],
    "seq_len": [3, 2, 1],
}
SCHEMA = pa.schema(
    [
        pa.field(
            "messages", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
        ),
        pa.field("input_ids", pa.list_(pa.int64())),
        pa.field("loss_mask", pa.list_(pa.bool_())),
        pa.field("small", pa.list_(pa.int32())),
        pa.field("seq_len", pa.int64()),
    ]
)


def _write(d: Path, tables: list[pa.Table], chunk: int) -> Path:
    names = []
    for i, table in enumerate(tables):
        name = f"data-{i:05d}-of-{len(tables):05d}.arrow"
        with pa.OSFile(str(d / name), "wb") as sink:
            writer = pa.RecordBatchStreamWriter(sink, SCHEMA)
            for batch in table.to_batches(max_chunksize=chunk):
                writer.write_batch(batch)
            writer.close()
        names.append({"filename": name})
    (d / "state.json").write_text(json.dumps({"_data_files": names}))
    return d


@pytest.mark.parametrize("chunk", [1, 2, 1000])
def test_rows_come_back_as_written(tmp_path, chunk):
    table = pa.table(ROWS, schema=SCHEMA)
    d = _write(tmp_path, [table.slice(1), table.slice(0, 1)], chunk)
    cols = read_dataset_columns(d, ("input_ids", "loss_mask", "small"))
    order = [1, 2, 0]
    assert len(cols) == 3
    for row, src in enumerate(order):
        assert cols.row("input_ids", row).tolist() == ROWS["input_ids"][src]
        assert cols.row("loss_mask", row).tolist() == [int(b) for b in ROWS["loss_mask"][src]]
        assert cols.row("small", row).tolist() == ROWS["small"][src]


def test_missing_column_and_wrong_type_are_named(tmp_path):
    d = _write(tmp_path, [pa.table(ROWS, schema=SCHEMA)], 1000)
    with pytest.raises(InputError, match=r"no column\(s\) labels"):
        read_dataset_columns(d, ("input_ids", "labels"))
    with pytest.raises(InputError, match="'seq_len' is not a list of integers"):
        read_dataset_columns(d, ("seq_len",))


def test_a_truncated_stream_is_an_error(tmp_path):
    d = _write(tmp_path, [pa.table(ROWS, schema=SCHEMA)], 1000)
    path = d / "data-00000-of-00001.arrow"
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(InputError, match="truncated Arrow stream"):
        read_dataset_columns(d, ("input_ids",))
