"""The parser fuzzer, longer: tests/fuzz under the `bench` hypothesis profile.

`make test` runs each fuzz test on a small fixed set of cases (the `fuzz-ci` profile in
tests/fuzz/bounds.py). This runs them on many random ones and prints, per test, the
cases tried and how long they took, from hypothesis's own statistics:

    .venv/bin/python bench/fuzz.py                    # 3000 cases per test
    .venv/bin/python bench/fuzz.py --examples 20000 -k served_metrics

Exits as pytest does: 1 when any parser broke its contract (the failing case is printed).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_TEST = re.compile(r"^tests/fuzz/(\S+)::(\S+):$")
_PHASE = re.compile(r"^\s+- during generate phase \(([\d.]+) seconds\)")
_CASES = re.compile(r"^\s+- (\d+) passing, (\d+) failing")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=3000, help="cases per test")
    parser.add_argument("-k", default=None, help="only tests matching this pytest -k expression")
    args = parser.parse_args()
    env = dict(os.environ, HYPOTHESIS_PROFILE="bench", DFLASH_FUZZ_EXAMPLES=str(args.examples))
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-n",
        "0",
        "-p",
        "no:cacheprovider",
        "tests/fuzz",
    ]
    command += ["--hypothesis-show-statistics", "-o", "faulthandler_timeout=120", "-o", "timeout=0"]
    if args.k:
        command += ["-k", args.k]
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    rows: list[tuple[str, str, str, str]] = []
    current, seconds = None, "0"
    for line in proc.stdout.splitlines():
        if m := _TEST.match(line.strip()):
            current = f"{m.group(1).removeprefix('test_fuzz_').removesuffix('.py')}: {m.group(2)}"
        elif m := _PHASE.match(line):
            seconds = m.group(1)
        elif current and (m := _CASES.match(line)):
            rows.append((current, m.group(1), m.group(2), seconds))
            current = None
    width = max((len(r[0]) for r in rows), default=10)
    print(f"{'parser: test':<{width}}  {'cases':>7}  {'failed':>6}  {'seconds':>7}")
    for name, passing, failing, seconds in rows:
        print(f"{name:<{width}}  {passing:>7}  {failing:>6}  {float(seconds):>7.1f}")
    print(proc.stdout.splitlines()[-1] if proc.stdout.strip() else proc.stderr[-2000:])
    if proc.returncode:
        failures = proc.stdout.split("= FAILURES =", 1)[-1].split("= Hypothesis Statistics =", 1)[0]
        print(failures[:8000], file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
