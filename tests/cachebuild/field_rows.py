"""Rows of the field's five datasets in their hub column layouts, written as the hub and
`datasets` hold them (parquet, a save_to_disk folder, JSONL), with pyarrow.

The texts are abridged from the real splits; what matters is each dataset's columns and
types (MT-Bench's `prompt` is a list of turns, MBPP's `task_id` an integer), and text with
braces, backslashes and newlines a formatter could mangle.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

GSM8K = [
    {
        "question": "Janet\u2019s ducks lay 16 eggs per day. She eats three for breakfast every "
        "morning and bakes muffins for her friends every day with four. How much in dollars "
        "does she make every day at the farmers' market?",
        "answer": "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\n#### 18",
    },
    {
        "question": "A robe takes 2 bolts of blue fiber and half that much white fiber. How "
        "many bolts in total does it take?",
        "answer": "It takes 2/2=<<2/2=1>>1 bolt of white fiber\n#### 3",
    },
    {
        "question": "Josh decides to try flipping a house.  He buys a house for $80,000 and "
        "then puts in $50,000 in repairs. How much profit did he make?",
        "answer": "#### 70000",
    },
    {"question": "What is {x} when x = 2?", "answer": "#### 2"},
]

MATH500 = [
    {
        "problem": "Convert the point $(0,3)$ in rectangular coordinates to polar coordinates."
        "  Enter your answer in the form $(r,\\theta),$ where $r > 0$ and $0 \\le \\theta < 2 "
        "\\pi.$",
        "solution": "We have that $r = \\sqrt{0^2 + 3^2} = 3.$",
        "answer": "\\left( 3, \\frac{\\pi}{2} \\right)",
        "subject": "Precalculus",
        "level": 2,
        "unique_id": "test/precalculus/807.json",
    },
    {
        "problem": "Define\n\\[p = \\sum_{k = 1}^\\infty \\frac{1}{k^2}.\\]Find a way to write "
        "$\\sum_{j = 1}^\\infty \\sum_{k = 1}^\\infty \\frac{1}{(j + k)^3}$ in terms of $p$.",
        "solution": "We count the number of times $\\frac{1}{n^3}$ appears.",
        "answer": "p - q",
        "subject": "Intermediate Algebra",
        "level": 5,
        "unique_id": "test/intermediate_algebra/1994.json",
    },
    {
        "problem": "If $f(x) = \\frac{3x-2}{x-2}$, what is the value of $f(-2) +f(-1)+f(0)$?",
        "solution": "$f(-2)+f(-1)+f(0)=\\frac{14}{3}$",
        "answer": "\\frac{14}{3}",
        "subject": "Algebra",
        "level": 3,
        "unique_id": "test/algebra/2584.json",
    },
]

HUMANEVAL = [
    {
        "task_id": "HumanEval/0",
        "prompt": "from typing import List\n\n\ndef has_close_elements(numbers: List[float], "
        'threshold: float) -> bool:\n    """ Check if in given list of numbers, are any two '
        'numbers closer to each other than\n    given threshold.\n    """\n',
        "canonical_solution": "    return False\n",
        "test": "def check(candidate):\n    assert candidate([1.0, 2.0], 0.5) == False\n",
        "entry_point": "has_close_elements",
    },
    {
        "task_id": "HumanEval/1",
        "prompt": "from typing import List\n\n\ndef separate_paren_groups(paren_string: str) -> "
        "List[str]:\n    \"\"\" >>> separate_paren_groups('( ) (( ))')\n    ['()', '(())']\n"
        '    """\n',
        "canonical_solution": "    return []\n",
        "test": "def check(candidate):\n    pass\n",
        "entry_point": "separate_paren_groups",
    },
    {
        "task_id": "HumanEval/2",
        "prompt": '\n\ndef truncate_number(number: float) -> float:\n    """ Return the decimal '
        'part of the number.\n    >>> truncate_number(3.5)\n    0.5\n    """\n',
        "canonical_solution": "    return number % 1.0\n",
        "test": "def check(candidate):\n    assert candidate(3.5) == 0.5\n",
        "entry_point": "truncate_number",
    },
]

MBPP = [
    {
        "source_file": "Benchmark Questions Verification V2.ipynb",
        "task_id": 2,
        "prompt": "Write a function to find the shared elements from the given two lists.",
        "code": "def similar_elements(a, b):\n    return tuple(set(a) & set(b))",
        "test_imports": [],
        "test_list": ["assert set(similar_elements((3, 4), (4, 5))) == set((4,))"],
    },
    {
        "source_file": "Benchmark Questions Verification V2.ipynb",
        "task_id": 3,
        "prompt": "Write a python function to identify non-prime numbers.",
        "code": "def is_not_prime(n):\n    return n > 1",
        "test_imports": [],
        "test_list": ["assert is_not_prime(2) == False"],
    },
    {
        "source_file": "Mike's Copy of Benchmark Questions Verification V2.ipynb",
        "task_id": 4,
        "prompt": "Write a function to find the n largest integers from a given list of "
        "numbers, returned in descending order.",
        "code": "import heapq as hq\ndef heap_queue_largest(nums, n):\n    return []",
        "test_imports": ["import heapq as hq"],
        "test_list": ["assert heap_queue_largest([25, 35], 1) == [35]"],
    },
]

MT_BENCH = [
    {
        "prompt": [
            "Compose an engaging travel blog post about a recent trip to Hawaii, highlighting "
            "cultural experiences and must-see attractions.",
            "Rewrite your previous response. Start every sentence with the letter A.",
        ],
        "prompt_id": 81,
        "category": "writing",
        "reference": [],
    },
    {
        "prompt": [
            "Draft a professional email seeking your supervisor's feedback on the 'Quarterly "
            "Financial Report' you prepared.",
            "Take a moment to evaluate and critique your own response.",
        ],
        "prompt_id": 82,
        "category": "writing",
        "reference": [],
    },
    {
        "prompt": [
            "Implement a program to find the common elements in two arrays without using any "
            "extra data structures.",
            "Now the constraint of not using extra data structure is removed.",
        ],
        "prompt_id": 125,
        "category": "coding",
        "reference": ["O(n^2)", "Use a hash table"],
    },
]

# the hub's column types where pyarrow would guess otherwise
SCHEMAS = {
    "math500": pa.schema(
        [
            ("problem", pa.string()),
            ("solution", pa.string()),
            ("answer", pa.string()),
            ("subject", pa.string()),
            ("level", pa.int64()),
            ("unique_id", pa.string()),
        ]
    ),
    "mbpp": pa.schema(
        [
            ("source_file", pa.string()),
            ("task_id", pa.int32()),
            ("prompt", pa.string()),
            ("code", pa.string()),
            ("test_imports", pa.list_(pa.string())),
            ("test_list", pa.list_(pa.string())),
        ]
    ),
    "mt-bench": pa.schema(
        [
            ("prompt", pa.list_(pa.string())),
            ("prompt_id", pa.int64()),
            ("category", pa.string()),
            ("reference", pa.list_(pa.string())),
        ]
    ),
}


def table(name: str, rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=SCHEMAS.get(name))


def write_parquet(path: Path, name: str, rows: list[dict[str, Any]]) -> Path:
    pq.write_table(table(name, rows), str(path))
    return path


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return path


def write_saved(folder: Path, name: str, rows: list[dict[str, Any]], split: str) -> Path:
    """The folder `DatasetDict.save_to_disk` writes: dataset_dict.json, and per split an
    Arrow stream file with state.json naming it."""
    part = folder / split
    part.mkdir(parents=True)
    t = table(name, rows)
    with pa.OSFile(str(part / "data-00000-of-00001.arrow"), "wb") as sink:
        with pa.ipc.new_stream(sink, t.schema) as writer:
            writer.write_table(t)
    state = {
        "_data_files": [{"filename": "data-00000-of-00001.arrow"}],
        "_fingerprint": "0" * 16,
        "_format_columns": None,
        "_format_kwargs": {},
        "_format_type": None,
        "_output_all_columns": False,
        "_split": split,
    }
    (part / "state.json").write_text(json.dumps(state))
    (part / "dataset_info.json").write_text("{}")
    (folder / "dataset_dict.json").write_text(json.dumps({"splits": [split]}))
    return folder
