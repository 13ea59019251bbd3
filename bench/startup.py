"""Start-up of `dflash-tui` commands: wall time of a no-op run (`--help`), before and after.

Runs `python -m dflash_tui CMD --help` for each command, alternating between
this checkout's src/ and another source tree (`--before-src`, e.g. an older
commit's `git archive`), so both see the same load, and prints the medians.
The time an operator waits before a command starts working is mostly Python
importing what the command needs.

    .venv/bin/python bench/startup.py --before-src /tmp/before/src --runs 10
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = [["--help"], ["relay", "--help"], ["status", "--help"], ["logs", "--help"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before-src", default=None, help="another src/ tree to compare")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    trees = {"after": ROOT / "src"}
    if args.before_src:
        trees = {"before": Path(args.before_src).resolve(), **trees}
    times: dict[tuple[str, str], list[float]] = {}
    print(f"load average before: {os.getloadavg()}")
    for _ in range(args.runs):
        for cmd in COMMANDS:
            for name, tree in trees.items():
                env = {**os.environ, "PYTHONPATH": str(tree)}
                started = time.perf_counter()
                subprocess.run(
                    [sys.executable, "-m", "dflash_tui", *cmd],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    check=True,
                )
                times.setdefault((" ".join(cmd), name), []).append(time.perf_counter() - started)
    print(f"load average after: {os.getloadavg()}")
    print("| command | " + " | ".join(f"{n} s" for n in trees) + " |")
    print("|---|" + "---|" * len(trees))
    for cmd in COMMANDS:
        word = " ".join(cmd)
        cells = " | ".join(f"{statistics.median(times[(word, n)]):.3f}" for n in trees)
        print(f"| `dflash-tui {word}` | {cells} |")


if __name__ == "__main__":
    main()
