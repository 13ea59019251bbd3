"""The console at rest: CPU and memory of `dflash-tui` watching ten busy runs, in tmux.

Starts a demo cluster (in its own process) with N healthy runs that each log
L lines a second (default 10 x 5), opens the real console on it inside a
private tmux server at 160x48, waits until every run is followed, then
samples the console process's CPU time and RSS every few seconds for the
measuring window. Side by side, in the same run and on the same cluster, it
measures what an operator would do instead: one `ssh host tail -F LOG` per
run in tmux windows (OpenSSH client, the pct shim, the same logs).

Prints CPU as a percentage of one core (process CPU time / wall time), RSS at
start and end and its least-squares slope per hour, and the ratio to the
ssh tails, against the goals: below 3% of one core, memory flat.

    .venv/bin/python bench/ui_idle.py                 # 2 minutes measured
    .venv/bin/python bench/ui_idle.py --minutes 60    # the full hour
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
sys.path.insert(0, str(ROOT / "src"))

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024
GOAL_CPU_PCT = 3.0
GOAL_RSS_MIB_PER_H = 10.0


# --------------------------------------------------------------------------- demo process


def serve_demo(base: Path, runs: int, interval_s: float) -> None:
    """Child-process entry: serve the cluster, print the config path, stop on SIGTERM."""
    from dflash_tui.demo.cluster import DemoCluster, DemoRun

    demo_runs = tuple(
        DemoRun(f"run{i:02d}", "healthy", i, checkpoints=False, total_steps=100_000_000)
        for i in range(runs)
    )
    cluster = DemoCluster(base, trainer_interval_s=interval_s, runs=demo_runs, eval_assets=False)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    with cluster.serve_in_thread() as path:
        print(path, flush=True)
        while not stop:
            time.sleep(0.2)


def serve_core(config: Path, seconds: float) -> None:
    """Child-process entry: the console's core (session: monitor, jobs) without the UI."""
    import asyncio

    from dflash_tui.config import load_config
    from dflash_tui.session import ConsoleSession

    async def run() -> None:
        session = ConsoleSession(load_config(config))
        # As the console does: the first run's log is on screen, the others gather.
        session.watch_lines(session.run_names()[0] if session.run_names() else None)
        await session.start()
        await asyncio.sleep(seconds)
        await session.stop()

    asyncio.run(run())


# --------------------------------------------------------------------------- /proc


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of `pid` (all threads)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rfind(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            out += [int(c) for c in (task / "children").read_text().split()]
    return out


def descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for child in children(todo.pop()):
            found.append(child)
            todo.append(child)
    return found


def cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    return ""


def slope_per_h(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MiB) in MiB per hour."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(t for t, _ in points) / n
    my = sum(v for _, v in points) / n
    sxx = sum((t - mx) ** 2 for t, _ in points)
    sxy = sum((t - mx) * (v - my) for t, v in points)
    return 0.0 if sxx == 0 else sxy / sxx * 3600


# --------------------------------------------------------------------------- tmux


class Tmux:
    """A private tmux server (own socket, no user config)."""

    def __init__(self, name: str) -> None:
        self.socket = f"dflash-bench-{os.getpid()}-{name}"
        self.env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TMUX")}

    def __call__(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            timeout=15,
            env=self.env,
        ).stdout

    def server_pid(self) -> int:
        return int(self("display-message", "-p", "#{pid}").strip())

    def pane_pid(self, target: str) -> int:
        return int(self("display-message", "-p", "-t", target, "#{pane_pid}").strip())

    def kill(self) -> None:
        self("kill-server")


def measure(pids: list[int], seconds: float, every_s: float, rss_of: int | None) -> dict:
    """CPU % of one core summed over `pids`, and RSS samples of `rss_of`, over `seconds`."""
    t0 = time.monotonic()
    c0 = sum(cpu_s(p) for p in pids)
    samples: list[tuple[float, float]] = []
    deadline = t0 + seconds
    while True:
        now = time.monotonic()
        if rss_of is not None:
            samples.append((now - t0, rss_mib(rss_of)))
        if now >= deadline:
            break
        time.sleep(min(every_s, deadline - now))
    wall = time.monotonic() - t0
    c1 = sum(cpu_s(p) for p in pids)
    return {"cpu_pct": 100 * (c1 - c0) / wall, "wall_s": wall, "rss": samples}


def count_lines(paths: list[Path]) -> int:
    total = 0
    for p in paths:
        with contextlib.suppress(OSError), p.open("rb") as f:
            total += sum(chunk.count(b"\n") for chunk in iter(lambda f=f: f.read(1 << 20), b""))
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--minutes", type=float, default=2.0, help="measuring window (60: the hour)"
    )
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--lines-per-s", type=float, default=5.0, help="per run")
    parser.add_argument("--warmup-s", type=float, default=30.0, help="after every run is followed")
    parser.add_argument("--sample-s", type=float, default=5.0)
    parser.add_argument("--baseline-s", type=float, default=60.0, help="ssh tail -F window")
    parser.add_argument("--core-s", type=float, default=90.0, help="core-only window")
    parser.add_argument("--serve-core", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument(
        "--serve-demo", nargs=3, metavar=("DIR", "RUNS", "INTERVAL"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.serve_core:
        serve_core(Path(args.serve_core[0]), float(args.serve_core[1]))
        return 0
    if args.serve_demo:
        serve_demo(Path(args.serve_demo[0]), int(args.serve_demo[1]), float(args.serve_demo[2]))
        return 0
    if shutil.which("tmux") is None or shutil.which("ssh") is None:
        print("needs tmux and an OpenSSH client", file=sys.stderr)
        return 2

    base = Path(tempfile.mkdtemp(prefix="dflash-ui-idle-"))
    interval = 1.0 / args.lines_per_s
    demo = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--serve-demo",
            str(base / "demo"),
            str(args.runs),
            str(interval),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    tmux = Tmux("console")
    tails = Tmux("tails")
    try:
        assert demo.stdout is not None
        config = Path(demo.stdout.readline().strip())
        workspace = base / "demo" / "trainbox" / "ct200" / "workspace"
        logs = [workspace / f"train_run{i:02d}.log" for i in range(args.runs)]
        print(f"demo: {args.runs} runs at {args.lines_per_s:g} lines/s each; config {config}")

        # ---- the console, in tmux at 160x48
        console = (
            f"env -u COLUMNS -u LINES TERM=tmux-256color {sys.executable} -m dflash_tui "
            f"--config {config}"
        )
        tmux("new-session", "-d", "-s", "console", "-x", "160", "-y", "48", console)
        pane = tmux.pane_pid("console")
        pid = next((p for p in [pane, *descendants(pane)] if "dflash_tui" in cmdline(p)), pane)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            screen = tmux("capture-pane", "-p", "-t", "console")
            if sum(1 for line in screen.splitlines() if " alive " in line) >= min(args.runs, 8):
                break
            time.sleep(1)
        else:
            print("the console did not show the runs alive within 120 s:\n" + screen)
            return 1
        print(f"console pid {pid} follows every run; warming up {args.warmup_s:g} s")
        time.sleep(args.warmup_s)
        server = tmux.server_pid()
        lines0 = count_lines(logs)
        window_s = args.minutes * 60
        load0 = os.getloadavg()[0]
        console_m = measure([pid], window_s, args.sample_s, rss_of=pid)
        tmux_cpu = console_m["cpu_pct"]
        lines_per_s = (count_lines(logs) - lines0) / console_m["wall_s"]
        # tmux's share while it showed the console: measured in a short second window.
        tmux_m = measure([server], min(30.0, window_s), args.sample_s, rss_of=None)
        tmux("send-keys", "-t", "console", "q")
        time.sleep(3)
        tmux.kill()

        # ---- the same core (monitor, jobs) without the UI, for attribution
        core = subprocess.Popen(
            [sys.executable, __file__, "--serve-core", str(config), str(args.core_s + 60)]
        )
        time.sleep(min(args.warmup_s, 30.0) + 15)
        core_m = measure([core.pid], args.core_s, args.sample_s, rss_of=core.pid)
        core.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            core.wait(15)

        # ---- what an operator would run instead: ssh host tail -F, one window per run
        text = config.read_text()
        port = text.split("[hosts.trainbox]", 1)[1].split("port = ", 1)[1].split()[0]
        for i, log in enumerate(logs):
            remote = f"workspace/{log.name}"
            ssh = (
                f"ssh -F /dev/null -i {base / 'demo' / 'client' / 'id_ed25519'} "
                f"-o UserKnownHostsFile={base / 'demo' / 'known_hosts'} -o StrictHostKeyChecking=yes "
                f"-o BatchMode=yes -p {port} 127.0.0.1 pct exec 200 -- tail -n 20 -F {remote}"
            )
            if i == 0:
                tails("new-session", "-d", "-s", "tails", "-x", "160", "-y", "48", ssh)
            else:
                tails("new-window", "-t", "tails", ssh)
        time.sleep(5)
        if not tails("list-sessions"):
            print("the ssh tails did not start:", ssh, file=sys.stderr)
            return 1
        server = tails.server_pid()
        ssh_pids = [p for p in descendants(server) if cmdline(p).startswith("ssh ")]
        ssh_m = measure(ssh_pids, args.baseline_s, args.sample_s, rss_of=None)
        tails_tmux_m = measure([server], min(30.0, args.baseline_s), args.sample_s, rss_of=None)
    finally:
        tmux.kill()
        tails.kill()
        demo.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            demo.wait(30)
        shutil.rmtree(base, ignore_errors=True)

    rss = console_m["rss"]
    slope_all = slope_per_h(rss)
    slope = slope_per_h(rss[len(rss) // 2 :])  # after the histories have had time to fill
    cpu = tmux_cpu
    ratio = cpu / ssh_m["cpu_pct"] if ssh_m["cpu_pct"] > 0 else float("inf")
    print()
    print(f"machine: {os.cpu_count()} cores, load average {load0:.2f} when measuring")
    print(f"window: {console_m['wall_s']:.0f} s, logs grew {lines_per_s:.1f} lines/s in total")
    print(f"dflash-tui (160x48 in tmux):     CPU {cpu:5.2f}% of one core")
    print(f"  tmux server showing it:        CPU {tmux_m['cpu_pct']:5.2f}%")
    print(
        f"  RSS {rss[0][1]:.1f} MiB -> {rss[-1][1]:.1f} MiB "
        f"(min {min(v for _, v in rss):.1f}, max {max(v for _, v in rss):.1f}), "
        f"slope {slope_all:+.1f} MiB/h over all {len(rss)} samples, "
        f"{slope:+.1f} MiB/h over the second half"
    )
    print(
        f"  of which the core (session without UI, own process): CPU {core_m['cpu_pct']:5.2f}%, "
        f"RSS {core_m['rss'][0][1]:.1f} -> {core_m['rss'][-1][1]:.1f} MiB in {core_m['wall_s']:.0f} s"
    )
    print(
        f"ssh tail -F x{len(ssh_pids)} (tmux windows): CPU {ssh_m['cpu_pct']:5.2f}% "
        f"(ssh clients), tmux server {tails_tmux_m['cpu_pct']:.2f}%"
    )
    print(f"ratio dflash-tui / ssh tails:    {ratio:.2f}x")
    ok_cpu = cpu < GOAL_CPU_PCT
    ok_rss = abs(slope) < GOAL_RSS_MIB_PER_H
    print(f"goal CPU < {GOAL_CPU_PCT:g}% of one core: {'PASS' if ok_cpu else 'FAIL'}")
    print(
        f"goal memory flat (|slope| < {GOAL_RSS_MIB_PER_H:g} MiB/h, second half): "
        f"{'PASS' if ok_rss else 'FAIL'}"
    )
    return 0 if ok_cpu and ok_rss else 1


if __name__ == "__main__":
    sys.exit(main())
