"""z-lab/dflash `dflash/benchmark.py`: its printed summary, saved (`... 2>&1 | tee logs/gsm8k.log`).

The script saves nothing itself; people keep its output. Two summaries exist:

- `--backend transformers` / `mlx` (`_print_decode_summary`), after the tqdm bar::

      Baseline throughput: 45.12 tok/s          (newer versions only)
      DFlash throughput:  201.50 tok/s          (newer versions only)
      Decoding speedup: 4.47
      Average Acceptance length: 6.54
      Acceptance length histogram: ['0.0%', '12.0%', ..., '17.0%']

  printed with rich, which wraps the histogram over several lines when the output
  is not a terminal (80 columns). It names no dataset: the task comes from the
  `Running Benchmark: gsm8k with 128 samples` banner of the repository's
  `run_benchmark.sh`, else `--task`, else the file name (`logs/gsm8k.log`, as that
  script saves it). The histogram has block_size + 1 entries.
- `--backend sglang` / `vllm` (`_run_server`): a block between two lines of 50 `=`
  with `Backend:`, `Dataset:`, `Num prompts:`, `Concurrency:`, `Latency: 12.3s`,
  `Output tokens:`, `Throughput: 1,234.56 tok/s`, and, for SGLang only,
  `Accept length: 6.543` and `Spec verify ct:`.

A saved output may hold several summaries (a loop over datasets, `tee -a`); each
becomes one entry.
"""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path
from typing import Any

from dflash_tui.evals.results.served.record import ServedEntry, ServedFormatError, ServedReport

FORMAT = "zlab"
WRITER = "z-lab/dflash dflash/benchmark.py (saved output)"

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_RULE = re.compile(r"^={20,}$")
_BANNER = re.compile(
    r"^Running Benchmark: (?:dataset=)?(?P<task>\S+?)(?: with (?P<n>\d+) samples)?\s"
)
_NUMBER = r"(?P<value>[-+]?[\d,]*\.?\d+(?:[eE][-+]?\d+)?|inf|nan)"
_DECODE_KEYS = {
    "Baseline throughput": "baseline_tok_s",
    "DFlash throughput": "throughput_tok_s",
    "Decoding speedup": "speedup",
    "Average Acceptance length": "tau",
}
_DECODE = re.compile(
    r"^(?P<key>"
    + "|".join(map(re.escape, _DECODE_KEYS))
    + r"):\s*"
    + _NUMBER
    + r"(?:\s*tok/s)?\s*$"
)
_HISTOGRAM = re.compile(r"^Acceptance length histogram:\s*(?P<rest>\[.*)$")
_SERVER_KEYS = {
    "Backend": "backend",
    "Dataset": "dataset",
    "Num prompts": "num_prompts",
    "Concurrency": "concurrency",
    "Latency": "latency_s",
    "Output tokens": "output_tokens",
    "Throughput": "throughput_tok_s",
    "Accept length": "tau",
    "Spec verify ct": "spec_verify_ct",
}
_SERVER = re.compile(r"^(?P<key>" + "|".join(map(re.escape, _SERVER_KEYS)) + r"):\s+(?P<value>.+)$")


def _lines(data: bytes) -> list[str]:
    """Text lines as a terminal shows them: colour codes gone, tqdm's `\\r` redraws collapsed."""
    text = _ANSI.sub("", data.decode("utf-8", "replace"))
    out = []
    for raw in text.split("\n"):
        line = raw.rstrip("\r").split("\r")[-1]
        out.append(line.strip())
    return out


def detect(data: bytes) -> bool:
    """Whether `data` holds at least one summary of either kind."""
    if data[:2] == b"PK" or b"\x00" in data[:4096]:
        return False
    lines = _lines(data)
    return any(_DECODE.match(x) and x.startswith("Average Acceptance") for x in lines) or any(
        _SERVER.match(x) and x.startswith("Backend:") for x in lines
    )


def _number(text: str) -> float | None:
    text = text.strip().removesuffix("tok/s").removesuffix("s").strip().replace(",", "")
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None  # "nan", "1e400": no number printed


def _histogram(text: str) -> list[float] | None:
    """`['0.0%', '12.0%']` -> [0.0, 0.12]; None if it does not parse."""
    try:
        values = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        return None
    try:
        shares = [round(float(v.rstrip("%")) / 100, 6) for v in values]
    except ValueError:
        return None
    return shares if all(math.isfinite(x) for x in shares) else None


def read(data: bytes, path: Path, *, task: str | None = None) -> ServedReport:
    """Every summary in the saved output; ServedFormatError when there is none."""
    lines = _lines(data)
    entries: list[ServedEntry] = []
    notes: list[str] = []
    banner: str | None = None
    decode: dict[str, Any] = {}
    server: dict[str, str] | None = None

    def task_name(where: int) -> str:
        if banner:
            return banner
        if task:
            return task
        note = (
            f"the summary ending at line {where} names no dataset: task {path.stem!r} taken from "
            "the file name (pass --task to name it)"
        )
        notes.append(note)
        return path.stem

    def flush_decode(where: int) -> None:
        nonlocal decode
        if "tau" not in decode:
            decode = {}
            return
        hist = decode.pop("histogram", None)
        settings = {"block_size": len(hist) - 1} if hist else {}
        entries.append(
            ServedEntry(
                task=task_name(where),
                method="dflash",
                tau=decode.get("tau"),
                throughput_tok_s=decode.get("throughput_tok_s"),
                speedup=decode.get("speedup"),
                baseline_tok_s=decode.get("baseline_tok_s"),
                settings=settings,
                details={"acceptance_histogram": hist} if hist else {},
            )
        )
        decode = {}

    def flush_server(where: int) -> None:
        nonlocal server
        if not server or "backend" not in server:
            server = None
            return
        backend = server["backend"]
        counts = {
            k: _number(server.get(k, ""))
            for k in ("num_prompts", "output_tokens", "spec_verify_ct")
        }
        details: dict[str, Any] = {k: int(v) for k, v in counts.items() if v is not None}
        if server.get("latency_s") is not None:
            details["latency_s"] = _number(server["latency_s"])
        tau = _number(server["tau"]) if "tau" in server else None
        if tau is None:
            notes.append(
                f"the {backend} summary ending at line {where} has no acceptance length "
                "(dflash.benchmark prints one for SGLang only): throughput only"
            )
        concurrency = _number(server.get("concurrency", ""))
        entries.append(
            ServedEntry(
                task=server.get("dataset") or task_name(where),
                method=backend,
                tau=tau,
                throughput_tok_s=_number(server.get("throughput_tok_s", "")),
                settings={
                    "backend": backend,
                    "concurrency": int(concurrency) if concurrency is not None else None,
                },
                details=details,
            )
        )
        server = None

    i = 0
    while i < len(lines):
        line, lineno = lines[i], i + 1
        m = _BANNER.match(line + " ")
        if m:
            flush_decode(lineno)
            banner = m.group("task")
        elif _RULE.match(line):
            if server is not None:
                flush_server(lineno)
            else:
                flush_decode(lineno)
                server = {}
        elif server is not None and (m := _SERVER.match(line)):
            server[_SERVER_KEYS[m.group("key")]] = m.group("value").strip()
        elif m := _DECODE.match(line):
            key = _DECODE_KEYS[m.group("key")]
            if key in decode:  # a second summary without a histogram between them
                flush_decode(lineno)
            decode[key] = _number(m.group("value"))
        elif m := _HISTOGRAM.match(line):
            text = m.group("rest")
            while "]" not in text and i + 1 < len(lines):  # rich wrapped it
                i += 1
                text += " " + lines[i]
            hist = _histogram(text[: text.index("]") + 1] if "]" in text else text)
            if hist is None:
                raise ServedFormatError(path, f"line {lineno}: cannot read the histogram {text!r}")
            decode["histogram"] = hist
            flush_decode(i + 1)
        i += 1
    if server is not None:
        flush_server(len(lines))
    flush_decode(len(lines))
    if not entries:
        raise ServedFormatError(
            path,
            "no dflash.benchmark summary in it (expected 'Average Acceptance length: X', or "
            "the block with 'Backend:' and 'Throughput:' between '=====' lines); did the "
            "benchmark finish?",
        )
    return ServedReport(FORMAT, WRITER, tuple(entries), notes=tuple(dict.fromkeys(notes)))
