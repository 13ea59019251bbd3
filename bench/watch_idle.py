"""`dflash-tui watch` at rest against the console: CPU of each watching the same runs.

A sibling of bench/ui_idle.py (whose demo cluster, tmux and /proc helpers it uses):
starts a demo cluster with N busy runs (default 10 runs x 5 lines a second), opens
the real console on it in a private tmux server at 160x48, and starts
`dflash-tui watch` on the same config beside it (stdout to a file, as under systemd).
Once both follow every run, it measures the CPU time of each over the same wall
window (both at once, so a neighbour's load weighs on both alike), and prints
them as percentages of one core, with the console's tmux server counted on the
console's side, and the ratio watch / console. Goal: watch costs less than the
console (ratio < 1).

    .venv/bin/python bench/watch_idle.py                  # 2 minutes measured
    .venv/bin/python bench/watch_idle.py --quiet-runs     # every run alive and quiet
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from ui_idle import Tmux, cmdline, cpu_s, descendants  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=2.0, help="measuring window")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--lines-per-s", type=float, default=5.0, help="per run")
    parser.add_argument("--quiet-runs", action="store_true", help="runs alive, no new lines")
    parser.add_argument("--warmup-s", type=float, default=30.0, help="after both follow every run")
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        print("needs tmux", file=sys.stderr)
        return 2

    base = Path(tempfile.mkdtemp(prefix="dflash-watch-idle-"))
    mode = "stalled" if args.quiet_runs else "healthy"
    demo = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "bench" / "ui_idle.py"),
            "--serve-demo",
            str(base / "demo"),
            str(args.runs),
            str(1.0 / args.lines_per_s),
            mode,
            "0",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    tmux = Tmux("watch-console")
    watch: subprocess.Popen[bytes] | None = None
    try:
        assert demo.stdout is not None
        config = Path(demo.stdout.readline().strip())
        what = "alive and quiet" if args.quiet_runs else f"at {args.lines_per_s:g} lines/s each"
        print(f"demo: {args.runs} runs {what}; config {config}")
        console = (
            f"env -u COLUMNS -u LINES TERM=tmux-256color {sys.executable} -m dflash_tui "
            f"--config {config}"
        )
        tmux("new-session", "-d", "-s", "console", "-x", "160", "-y", "48", console)
        pane = tmux.pane_pid("console")
        console_pid = next(
            (p for p in [pane, *descendants(pane)] if "dflash_tui" in cmdline(p)), pane
        )
        watch_log = base / "watch.log"
        with watch_log.open("wb") as out:
            watch = subprocess.Popen(
                [sys.executable, "-m", "dflash_tui", "watch", "--config", str(config)],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        shown = " stalled " if args.quiet_runs else " alive "
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            screen = tmux("capture-pane", "-p", "-t", "console")
            on_screen = sum(1 for line in screen.splitlines() if shown in line)
            if on_screen >= min(args.runs, 8) and "watch:" in watch_log.read_text():
                break
            time.sleep(1)
        else:
            print("the console or the watch did not start within 120 s", file=sys.stderr)
            return 1
        print(f"console pid {console_pid}, watch pid {watch.pid}; warming up {args.warmup_s:g} s")
        time.sleep(args.warmup_s)
        groups = {"console": [console_pid], "tmux": [tmux.server_pid()], "watch": [watch.pid]}
        load0 = os.getloadavg()[0]
        t0 = time.monotonic()
        c0 = {k: sum(cpu_s(p) for p in v) for k, v in groups.items()}
        time.sleep(args.minutes * 60)
        wall = time.monotonic() - t0
        pct = {k: 100 * (sum(cpu_s(p) for p in v) - c0[k]) / wall for k, v in groups.items()}
        load1 = os.getloadavg()[0]
        lines = [line for line in watch_log.read_text().splitlines() if " watch: " not in line]
        side = pct["console"] + pct["tmux"]
        print(f"window {wall:.0f} s, load average {load0:.2f} -> {load1:.2f}")
        print(f"console      {pct['console']:6.2f}% of one core")
        print(f"  + its tmux {pct['tmux']:6.2f}%  = {side:.2f}%")
        print(f"watch        {pct['watch']:6.2f}% of one core ({len(lines)} event lines logged)")
        ratio = pct["watch"] / side if side > 0 else float("nan")
        print(f"watch / (console + tmux) = {ratio:.2f}  (goal: < 1)")
        print(f"watch / console alone    = {pct['watch'] / pct['console']:.2f}")
        return 0 if ratio < 1 else 1
    finally:
        tmux("send-keys", "-t", "console", "q")
        if watch is not None:
            watch.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                watch.wait(15)
        time.sleep(2)
        tmux.kill()
        demo.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            demo.wait(15)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
