"""--dataset prompts equal z-lab's benchmark's (docs/evals.md "The protocol").

The expected strings are written by hand from reading z-lab/dflash's
`dflash/benchmark.py` (its DATASETS table): GSM8K and MATH-500 get a newline and
"Please reason step by step, and put your final answer within \\boxed{}.", HumanEval a
"Write a solution ..." line and a ```python fence, MBPP's sanitized prompt and
MT-Bench's first turn go as they are. The rows are read back from files in each dataset's
own column layout (tests/cachebuild/field_rows.py).
"""

from __future__ import annotations

import random
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from dflash_tui.shipped.cachebuild.datasets import (
    ALL,
    DATASETS,
    FIRST,
    SHUFFLE,
    Selection,
    formatted,
    read_rows,
    rows_sha256,
)
from dflash_tui.shipped.cachebuild.errors import InputError
from tests.cachebuild import field_rows as F

REASON = "\nPlease reason step by step, and put your final answer within \\boxed{}."

EXPECTED = {
    "gsm8k": [
        "Janet\u2019s ducks lay 16 eggs per day. She eats three for breakfast every morning and "
        "bakes muffins for her friends every day with four. How much in dollars does she make "
        "every day at the farmers' market?\n"
        "Please reason step by step, and put your final answer within \\boxed{}.",
        "A robe takes 2 bolts of blue fiber and half that much white fiber. How many bolts in "
        "total does it take?\n"
        "Please reason step by step, and put your final answer within \\boxed{}.",
        "Josh decides to try flipping a house.  He buys a house for $80,000 and then puts in "
        "$50,000 in repairs. How much profit did he make?\n"
        "Please reason step by step, and put your final answer within \\boxed{}.",
        "What is {x} when x = 2?\n"
        "Please reason step by step, and put your final answer within \\boxed{}.",
    ],
    "math500": [
        "Convert the point $(0,3)$ in rectangular coordinates to polar coordinates.  Enter your "
        "answer in the form $(r,\\theta),$ where $r > 0$ and $0 \\le \\theta < 2 \\pi.$\n"
        "Please reason step by step, and put your final answer within \\boxed{}.",
        "Define\n\\[p = \\sum_{k = 1}^\\infty \\frac{1}{k^2}.\\]Find a way to write "
        "$\\sum_{j = 1}^\\infty \\sum_{k = 1}^\\infty \\frac{1}{(j + k)^3}$ in terms of $p$.\n"
        "Please reason step by step, and put your final answer within \\boxed{}.",
        "If $f(x) = \\frac{3x-2}{x-2}$, what is the value of $f(-2) +f(-1)+f(0)$?\n"
        "Please reason step by step, and put your final answer within \\boxed{}.",
    ],
    "humaneval": [
        "Write a solution to the following problem and make sure that it passes the tests:\n"
        "```python\n"
        "from typing import List\n\n\n"
        "def has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
        '    """ Check if in given list of numbers, are any two numbers closer to each other '
        "than\n    given threshold.\n"
        '    """\n'
        "\n```",
        "Write a solution to the following problem and make sure that it passes the tests:\n"
        "```python\n"
        "from typing import List\n\n\n"
        "def separate_paren_groups(paren_string: str) -> List[str]:\n"
        '    """ >>> separate_paren_groups(\'( ) (( ))\')\n'
        "    ['()', '(())']\n"
        '    """\n'
        "\n```",
        "Write a solution to the following problem and make sure that it passes the tests:\n"
        "```python\n"
        "\n\ndef truncate_number(number: float) -> float:\n"
        '    """ Return the decimal part of the number.\n'
        "    >>> truncate_number(3.5)\n"
        "    0.5\n"
        '    """\n'
        "\n```",
    ],
    "mbpp": [
        "Write a function to find the shared elements from the given two lists.",
        "Write a python function to identify non-prime numbers.",
        "Write a function to find the n largest integers from a given list of numbers, returned "
        "in descending order.",
    ],
    "mt-bench": [
        "Compose an engaging travel blog post about a recent trip to Hawaii, highlighting "
        "cultural experiences and must-see attractions.",
        "Draft a professional email seeking your supervisor's feedback on the 'Quarterly "
        "Financial Report' you prepared.",
        "Implement a program to find the common elements in two arrays without using any extra "
        "data structures.",
    ],
}
ROWS = {
    "gsm8k": F.GSM8K,
    "math500": F.MATH500,
    "humaneval": F.HUMANEVAL,
    "mbpp": F.MBPP,
    "mt-bench": F.MT_BENCH,
}
IDS = {
    "gsm8k": [0, 1, 2, 3],  # no id column: the row's place in the split
    "math500": [
        "test/precalculus/807.json",
        "test/intermediate_algebra/1994.json",
        "test/algebra/2584.json",
    ],
    "humaneval": ["HumanEval/0", "HumanEval/1", "HumanEval/2"],
    "mbpp": [2, 3, 4],
    "mt-bench": [81, 82, 125],
}


def _write(kind: str, name: str, tmp_path: Path) -> Path:
    rows = ROWS[name]
    if kind == "parquet":
        return F.write_parquet(tmp_path / f"{name}.parquet", name, rows)
    if kind == "jsonl":
        return F.write_jsonl(tmp_path / f"{name}.jsonl", rows)
    return F.write_saved(tmp_path / name, name, rows, DATASETS[name].split)


@pytest.mark.parametrize("kind", ["parquet", "jsonl", "saved"])
@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_rows_prompt_equals_zlabs_formatting(name: str, kind: str, tmp_path: Path) -> None:
    spec = DATASETS[name]
    rows, source = read_rows(spec, _write(kind, name, tmp_path))
    way, indices = Selection().pick(len(rows))
    picked = formatted(spec, rows, indices)
    assert way == ALL and [p.text for p in picked] == EXPECTED[name]
    assert [p.sample_id for p in picked] == IDS[name]
    assert "data" in source


def test_the_rows_hash_is_the_same_from_every_file_kind(tmp_path: Path) -> None:
    spec = DATASETS["mt-bench"]
    hashes = {
        kind: rows_sha256(read_rows(spec, _write(kind, "mt-bench", tmp_path / kind))[0])
        for kind in ("parquet", "jsonl", "saved")
        if not (tmp_path / kind).mkdir()
    }
    assert len(set(hashes.values())) == 1, hashes
    other = [dict(F.MT_BENCH[0], category="roleplay"), *F.MT_BENCH[1:]]
    assert rows_sha256(other) != hashes["jsonl"]


def test_zlabs_names_configs_and_splits() -> None:
    got = {n: (s.path, s.config, s.split) for n, s in DATASETS.items()}
    assert got == {
        "gsm8k": ("openai/gsm8k", "main", "test"),
        "math500": ("HuggingFaceH4/MATH-500", None, "test"),
        "humaneval": ("openai/openai_humaneval", None, "test"),
        "mbpp": ("google-research-datasets/mbpp", "sanitized", "test"),
        "mt-bench": ("HuggingFaceH4/mt_bench_prompts", None, "train"),
    }


def test_max_samples_picks_zlabs_seeded_shuffle() -> None:
    # z-lab's transformers path: random.seed(0), then random.shuffle of the whole list
    rows = list(range(1319))
    random.seed(0)
    random.shuffle(rows)
    way, picked = Selection(max_samples=128).pick(1319)
    assert way == SHUFFLE and picked == rows[:128]
    assert Selection(max_samples=80).pick(80) == (ALL, list(range(80)))  # no shuffle then
    assert Selection(max_samples=2).as_dict(SHUFFLE) == {
        "way": "shuffle",
        "seed": 0,
        "max_samples": 2,
    }


def test_num_prompts_takes_the_first_rows_round_the_split() -> None:
    assert Selection(num_prompts=3).pick(80) == (FIRST, [0, 1, 2])
    assert Selection(num_prompts=5).pick(3) == (FIRST, [0, 1, 2, 0, 1])


def test_a_file_in_another_layout_names_the_column(tmp_path: Path) -> None:
    data = F.write_jsonl(tmp_path / "x.jsonl", [{"text": "hello"}])
    spec = DATASETS["gsm8k"]
    rows, _ = read_rows(spec, data)
    with pytest.raises(InputError) as err:
        formatted(spec, rows, [0])
    assert "columns found: text" in str(err.value) and "'question'" in str(err.value.hint)


def test_a_datasetdict_without_the_split_lists_those_it_has(tmp_path: Path) -> None:
    folder = F.write_saved(tmp_path / "mt", "mt-bench", F.MT_BENCH, "test")
    with pytest.raises(InputError, match=r"without the 'train' split \(splits: test"):
        read_rows(DATASETS["mt-bench"], folder)


def test_without_data_the_hosts_load_dataset_gets_zlabs_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No --data: the build host's `datasets.load_dataset` (a stand-in module here: the
    dev lock has no `datasets`) is called as z-lab's benchmark calls it."""
    calls: list[tuple[tuple[str, ...], dict[str, Any]]] = []

    def load_dataset(*args: str, **kwargs: Any) -> list[dict[str, Any]]:
        calls.append((args, kwargs))
        return ROWS["mbpp"] if args[0].endswith("mbpp") else ROWS["mt-bench"]

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    rows, source = read_rows(DATASETS["mbpp"], None)
    assert [p.text for p in formatted(DATASETS["mbpp"], rows, [0, 1, 2])] == EXPECTED["mbpp"]
    read_rows(DATASETS["mt-bench"], None)
    assert calls == [
        (("google-research-datasets/mbpp", "sanitized"), {"split": "test"}),
        (("HuggingFaceH4/mt_bench_prompts",), {"split": "train"}),
    ]
    assert source == {
        "load_dataset": ["google-research-datasets/mbpp", "sanitized"],
        "split": "test",
    }


def test_without_data_or_datasets_the_error_says_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)  # import datasets -> ImportError
    with pytest.raises(InputError) as err:
        read_rows(DATASETS["gsm8k"], None)
    assert "cannot import datasets" in str(err.value) and "--data" in str(err.value.hint)
