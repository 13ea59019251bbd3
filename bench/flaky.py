"""Flakiness under load: the UI and monitor tests, N rounds, with CPU hogs on every core.

A test that waits for time instead of for the state it needs passes on an idle
machine and fails on a busy one (CI's 2 cores while another job runs). This
runs the chosen test paths N times in a row while `--hogs` busy-loop processes
(default: one per core) keep the cores at 100%, and prints, per test that ever
failed, how many rounds it failed in, and the time of each round.

    .venv/bin/python bench/flaky.py                      # 20 rounds, tests/ui tests/monitor
    .venv/bin/python bench/flaky.py --rounds 5 tests/ui/test_at_rest.py
    make stress-test                                     # the same as the first line

Exits 1 when any test failed in any round (so it can gate a change), 0 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PATHS = ["tests/ui", "tests/monitor"]


def hog() -> None:
    """A busy loop: one core's worth of load, as a neighbour's job would be."""
    with contextlib.suppress(KeyboardInterrupt):
        while True:
            pass


def failures(junit: Path) -> tuple[list[str], int]:
    """The ids of the tests that failed or errored in one round, and how many ran."""
    if not junit.exists():
        return ["<pytest wrote no report>"], 0
    root = ET.parse(junit).getroot()
    failed, ran = [], 0
    for case in root.iter("testcase"):
        ran += 1
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(f"{case.get('classname', '')}::{case.get('name', '')}")
    return failed, ran


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=DEFAULT_PATHS, help="test paths")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--hogs", type=int, default=os.cpu_count() or 2, help="busy loops")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression")
    args = parser.parse_args(argv)

    hogs = [multiprocessing.Process(target=hog, daemon=True) for _ in range(args.hogs)]
    for p in hogs:
        p.start()
    counts: Counter[str] = Counter()
    times: list[float] = []
    print(
        f"{args.rounds} rounds of {' '.join(args.paths)} with {args.hogs} busy loops "
        f"on {os.cpu_count()} cores (load {os.getloadavg()[0]:.2f})",
        flush=True,
    )
    try:
        with tempfile.TemporaryDirectory(prefix="flaky-") as tmp:
            for n in range(1, args.rounds + 1):
                junit = Path(tmp) / f"round{n}.xml"
                cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                       f"--junitxml={junit}", *args.paths]  # fmt: skip
                if args.keyword:
                    cmd += ["-k", args.keyword]
                began = time.monotonic()
                subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                times.append(time.monotonic() - began)
                failed, ran = failures(junit)
                counts.update(failed)
                print(
                    f"round {n:2d}: {ran} tests, {len(failed)} failed, {times[-1]:.0f} s"
                    + (f"  ({', '.join(failed)})" if failed else ""),
                    flush=True,
                )
    finally:
        for p in hogs:
            p.terminate()
    print(f"\nload at the end {os.getloadavg()[0]:.2f}; rounds {min(times):.0f}-{max(times):.0f} s")
    if not counts:
        print(f"0 failures in {args.rounds} rounds")
        return 0
    print(f"{'failed rounds':>13}  test")
    for test, count in counts.most_common():
        print(f"{count:>6} / {args.rounds:<4}  {test}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
