"""The field's five datasets, loaded, formatted and picked as z-lab's benchmark does
(docs/evals.md "The protocol").

z-lab's ``dflash/benchmark.py`` is where DFlash's published numbers come from. For each
dataset it fixes the hub name, config and split, how a row becomes one user turn, and
which rows run: its transformers path seeds Python's ``random`` with 0 and shuffles the
whole split before keeping ``--max-samples`` (no shuffle when the split is that small
already); its server path takes rows in order, going round the split again when asked
for more than it has (``--num-prompts``). This module states the same facts in our own
code, so a cache built with ``--dataset`` holds the prompts that protocol sends.

The rows come from the build host: ``--data`` names a parquet or JSONL file or a
``datasets`` ``save_to_disk`` folder (read with pyarrow, which ``datasets`` always
installs), else the host's ``datasets.load_dataset`` fetches the split. pyarrow and
``datasets`` are imported only then, so the builder itself still needs neither.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import InputError

ZLAB_SEED = 0  # random.seed(0) on its transformers path, right before the shuffle
ZLAB_MAX_NEW_TOKENS = 2048  # its --max-new-tokens default
FORMATTER_VERSION = 1  # bump when a formatter's output changes for any row
REASON_SUFFIX = "\nPlease reason step by step, and put your final answer within \\boxed{}."
CODE_WRAPPER = (
    "Write a solution to the following problem and make sure that it passes the tests:\n"
    "```python\n{}\n```"
)

Row = Mapping[str, Any]

# how rows are picked (the manifest's protocol.selection.way)
SHUFFLE, FIRST, ALL = "shuffle", "first", "all"


def _reasoning(column: str) -> Callable[[Row], str]:
    return lambda row: f"{row[column]}{REASON_SUFFIX}"


def _code_task(row: Row) -> str:
    return CODE_WRAPPER.format(row["prompt"])


def _as_is(row: Row) -> str:
    return str(row["prompt"])


def _first_turn(row: Row) -> str:
    turns = row["prompt"]
    if isinstance(turns, str) or not isinstance(turns, Sequence) or not turns:
        raise ValueError(f"'prompt' must be a non-empty list of turns, found {turns!r}")
    return str(turns[0])


@dataclass(frozen=True)
class DatasetSpec:
    """One dataset as z-lab's benchmark names and formats it."""

    name: str  # --dataset
    path: str  # load_dataset's first argument
    config: str | None
    split: str
    column: str  # the column the formatter reads
    id_column: str | None  # the dataset's own sample id (None: the row's index)
    formatter: str
    format: Callable[[Row], str]


DATASETS: dict[str, DatasetSpec] = {
    s.name: s
    for s in (
        DatasetSpec(
            "gsm8k",
            "openai/gsm8k",
            "main",
            "test",
            column="question",
            id_column=None,
            formatter="zlab-reasoning",
            format=_reasoning("question"),
        ),
        DatasetSpec(
            "math500",
            "HuggingFaceH4/MATH-500",
            None,
            "test",
            column="problem",
            id_column="unique_id",
            formatter="zlab-reasoning",
            format=_reasoning("problem"),
        ),
        DatasetSpec(
            "humaneval",
            "openai/openai_humaneval",
            None,
            "test",
            column="prompt",
            id_column="task_id",
            formatter="zlab-code",
            format=_code_task,
        ),
        DatasetSpec(
            "mbpp",
            "google-research-datasets/mbpp",
            "sanitized",
            "test",
            column="prompt",
            id_column="task_id",
            formatter="zlab-as-is",
            format=_as_is,
        ),
        DatasetSpec(
            "mt-bench",
            "HuggingFaceH4/mt_bench_prompts",
            None,
            "train",
            column="prompt",
            id_column="prompt_id",
            formatter="zlab-first-turn",
            format=_first_turn,
        ),
    )
}


@dataclass(frozen=True)
class Selection:
    """Which rows: z-lab's transformers path (--max-samples), its server path
    (--num-prompts), or every row in order."""

    max_samples: int | None = None
    num_prompts: int | None = None

    def pick(self, n_rows: int) -> tuple[str, list[int]]:
        """(way, row indices) out of a split of ``n_rows``."""
        if self.num_prompts is not None:
            return FIRST, [i % n_rows for i in range(self.num_prompts)]
        if self.max_samples is None or n_rows <= self.max_samples:
            return ALL, list(range(n_rows))
        order = list(range(n_rows))
        # random.seed(0); random.shuffle(rows) permutes a list of n as this does
        random.Random(ZLAB_SEED).shuffle(order)
        return SHUFFLE, order[: self.max_samples]

    def as_dict(self, way: str) -> dict[str, Any]:
        out: dict[str, Any] = {"way": way}
        if way == SHUFFLE:
            out.update(seed=ZLAB_SEED, max_samples=self.max_samples)
        elif way == FIRST:
            out["num_prompts"] = self.num_prompts
        elif self.max_samples is not None:
            out["max_samples"] = self.max_samples  # asked, but the split is no larger
        return out


def rows_sha256(rows: Sequence[Row]) -> str:
    """sha256 of the rows as canonical JSON lines (keys sorted), whatever file they came from."""
    digest = hashlib.sha256()
    for row in rows:
        line = json.dumps(
            row, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str
        )
        digest.update(line.encode("utf-8") + b"\n")
    return digest.hexdigest()


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"--data {path}: cannot read it ({exc})") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"--data {path}, line {number}: not JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise InputError(f"--data {path}, line {number}: expected a JSON object per line")
        rows.append(row)
    return rows


def _pyarrow(path: Path) -> Any:
    try:
        import pyarrow
        import pyarrow.ipc
        import pyarrow.parquet
    except ImportError as exc:
        raise InputError(
            f"--data {path}: reading it needs pyarrow on this host ({exc})",
            hint="pip install pyarrow (or datasets, which brings it), or give a JSONL file",
        ) from None
    return pyarrow


def _read_saved(folder: Path, split: str) -> list[dict[str, Any]]:
    """A ``datasets`` ``save_to_disk`` folder: a Dataset, or a DatasetDict (its ``split``)."""
    if (folder / "dataset_dict.json").is_file():
        if not (folder / split / "state.json").is_file():
            found = sorted(p.name for p in folder.iterdir() if (p / "state.json").is_file())
            raise InputError(
                f"--data {folder}: a DatasetDict without the {split!r} split (splits: "
                f"{', '.join(found) or 'none'})"
            )
        folder = folder / split
    state_path = folder / "state.json"
    try:
        state = json.loads(state_path.read_text())
        files = [folder / f["filename"] for f in state["_data_files"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(
            f"--data {folder}: not a datasets save_to_disk folder ({state_path}: {exc})",
            hint="give a folder written by Dataset.save_to_disk, a .parquet or a .jsonl file",
        ) from None
    pa = _pyarrow(folder)
    rows: list[dict[str, Any]] = []
    for file in files:
        try:
            with pa.memory_map(str(file)) as source:
                rows += pa.ipc.open_stream(source).read_all().to_pylist()
        except (OSError, pa.ArrowInvalid) as exc:
            raise InputError(f"--data {file}: cannot read it as Arrow ({exc})") from None
    return rows


def read_rows(spec: DatasetSpec, data: Path | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The split's rows, in order, and where they came from (the manifest's ``source``)."""
    if data is None:
        try:
            from datasets import load_dataset
        except ImportError as exc:
            raise InputError(
                f"--dataset {spec.name}: no --data and cannot import datasets ({exc})",
                hint="pip install datasets on this host, or pass --data with the split as a "
                ".parquet/.jsonl file or a save_to_disk folder",
            ) from None
        args = (spec.path, spec.config) if spec.config else (spec.path,)
        loaded = load_dataset(*args, split=spec.split)
        return [dict(r) for r in loaded], {"load_dataset": list(args), "split": spec.split}
    path = Path(data)
    if path.is_dir():
        rows = _read_saved(path, spec.split)
    elif path.suffix == ".parquet":
        pa = _pyarrow(path)
        try:
            rows = pa.parquet.read_table(str(path)).to_pylist()
        except (OSError, pa.ArrowInvalid) as exc:
            raise InputError(f"--data {path}: cannot read it as parquet ({exc})") from None
    elif path.suffix in (".jsonl", ".json"):
        rows = _read_jsonl(path)
    elif not path.exists():
        raise InputError(f"--data {path}: no such file or folder")
    else:
        raise InputError(
            f"--data {path}: expected a .parquet or .jsonl file or a save_to_disk folder"
        )
    return rows, {"data": str(path.resolve())}


@dataclass(frozen=True)
class DatasetPrompt:
    """One picked row, formatted: the text of the user turn."""

    index: int  # the row's place in the split
    sample_id: str | int
    text: str


def formatted(
    spec: DatasetSpec, rows: Sequence[Row], indices: Sequence[int]
) -> list[DatasetPrompt]:
    """The picked rows' user turns; InputError names every row the formatter cannot read."""
    out, problems = [], []
    for i in indices:
        row = rows[i]
        try:
            text = spec.format(row)
        except (KeyError, ValueError, TypeError) as exc:
            problems.append(f"row {i}: {type(exc).__name__}: {exc}")
            continue
        sample_id = row.get(spec.id_column, i) if spec.id_column else i
        out.append(
            DatasetPrompt(i, sample_id if isinstance(sample_id, int) else str(sample_id), text)
        )
    if problems:
        columns = ", ".join(sorted(rows[indices[0]])) if indices else "none"
        raise InputError(
            f"--dataset {spec.name}: {len(problems)} row(s) not in {spec.path}'s layout "
            f"(columns found: {columns})",
            problems[:10],
            hint=f"the {spec.formatter} formatter reads the {spec.column!r} column",
        )
    return out


def protocol_block(
    spec: DatasetSpec,
    rows: Sequence[Row],
    source: Mapping[str, Any],
    selection: Selection,
    way: str,
    picked: Sequence[DatasetPrompt],
) -> dict[str, Any]:
    """What the manifest records (docs/evals.md "The protocol"); the builder adds the
    chat template's sha256, ``thinking`` and ``max_new_tokens``."""
    return {
        "dataset": spec.name,
        "path": spec.path,
        "config": spec.config,
        "split": spec.split,
        "source": dict(source),
        "rows": len(rows),
        "rows_sha256": rows_sha256(rows),
        "formatter": {"name": spec.formatter, "version": FORMATTER_VERSION},
        "selection": selection.as_dict(way),
        "sample_ids": [p.sample_id for p in picked],
        "rows_picked": [p.index for p in picked],
        "temperature": 0.0,
    }
