"""The console at rest: CPU and memory of `dflash-tui` watching ten busy runs, in tmux.

Starts a demo cluster (in its own process) with N healthy runs that each log
L lines a second (default 10 x 5), opens the real console on it inside a
private tmux server at 160x48, waits until every run is followed, then
samples the console process's CPU time and RSS every few seconds for the
measuring window. Side by side, on the same cluster and in the same window
(both run at once, so a neighbour's load on shared cores weighs on both), it
measures what an operator would do instead: one `ssh host tail -F LOG` per
run in tmux windows (OpenSSH client, the pct shim, the same logs);
`--baseline-s S` measures them afterwards instead, as the first version did.
Then it watches the log pane in tmux for `--freshness-s` to see how often new
lines show, and measures the console's core alone (no UI) for attribution.

Prints CPU as a percentage of one core (process CPU time / wall time), RSS at
start and end and its least-squares slope per hour, and the ratios to the
ssh tails, against the goals: the console plus its tmux server at most 2.0x
the ssh tails plus theirs, new log lines on screen at least once a second,
memory flat; with `--quiet-runs` (every run alive, no new lines) at most 0.5%
of one core.

    .venv/bin/python bench/ui_idle.py                 # 2 minutes measured
    .venv/bin/python bench/ui_idle.py --minutes 60    # the full hour
    .venv/bin/python bench/ui_idle.py --quiet-runs    # every run quiet
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
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
GOAL_CPU_PCT = 3.0  # the first goal, still printed; now the ratio with tmux counts
GOAL_RATIO_TMUX = 2.0  # console + its tmux against ten ssh tails + their tmux
GOAL_QUIET_CPU_PCT = 0.5  # every run quiet
GOAL_LOG_GAP_S = 1.0  # the selected run's log shows new lines at least this often
GOAL_RSS_MIB_PER_H = 10.0


# --------------------------------------------------------------------------- demo process


def serve_demo(
    base: Path, runs: int, interval_s: float, mode: str = "healthy", backfill: int = 0
) -> None:
    """Child-process entry: serve the cluster, print the config path, stop on SIGTERM.

    `mode` "stalled": every trainer stays alive and writes nothing after its backlog.
    `backfill`: lines of history each log starts with (0: the demo's 300).
    """
    from dflash_tui.demo.cluster import DemoCluster, DemoRun

    demo_runs = tuple(
        DemoRun(
            f"run{i:02d}",
            mode,
            i,
            checkpoints=False,
            total_steps=100_000_000,
            **({"backfill_steps": backfill * 10} if backfill else {}),
        )
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

    from dflash_tui.console.session import ConsoleSession
    from dflash_tui.core.config_parse import load_config
    from dflash_tui.ui import gc_policy

    async def run() -> None:
        gc_policy.for_a_long_run()  # as the console does (ui.app.run_console)
        loop = asyncio.get_running_loop()
        for s in gc_policy.SETTLE_S:
            loop.call_later(s, gc_policy.freeze_what_is_alive)
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


def start_tails(tails: Tmux, base: Path, config: Path, logs: list[Path]) -> list[int]:
    """One `ssh host tail -F LOG` per run, each in a tmux window; returns the ssh pids."""
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
        raise RuntimeError(f"the ssh tails did not start: {ssh}")
    return [p for p in descendants(tails.server_pid()) if cmdline(p).startswith("ssh ")]


def log_region(screen: str) -> str:
    """The log pane's rows on a 160x48 console screen (the left half under the runs)."""
    rows = screen.splitlines()
    try:
        top = next(i for i, row in enumerate(rows) if "─ log " in row)
    except StopIteration:
        return ""
    out = []
    for row in rows[top + 2 :]:
        if row.startswith("└"):
            break
        out.append(row[:80])
    return "\n".join(out)


def log_gaps(tmux: Tmux, seconds: float, every_s: float = 0.1) -> list[float]:
    """Seconds between changes of the log pane's text (and from the start and to the end
    of the watch), watched for `seconds`: the longest is how stale the log got."""
    start = time.monotonic()
    marks = [start]
    last = log_region(tmux("capture-pane", "-p", "-t", "console"))
    while time.monotonic() < start + seconds:
        time.sleep(every_s)
        region = log_region(tmux("capture-pane", "-p", "-t", "console"))
        if region != last:
            marks.append(time.monotonic())
        last = region
    marks.append(time.monotonic())
    return [b - a for a, b in itertools.pairwise(marks)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--minutes", type=float, default=2.0, help="measuring window (60: the hour)"
    )
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--lines-per-s", type=float, default=5.0, help="per run")
    parser.add_argument(
        "--quiet-runs",
        action="store_true",
        help="every run alive but writing nothing (the goal: at most 0.5%% of a core)",
    )
    parser.add_argument(
        "--backfill-lines",
        type=int,
        default=0,
        help="history each log starts with (0: 300 lines; 15000 fills the console's "
        "histories at once, as after 40 minutes of the hour)",
    )
    parser.add_argument("--warmup-s", type=float, default=30.0, help="after every run is followed")
    parser.add_argument("--sample-s", type=float, default=5.0)
    parser.add_argument(
        "--baseline-s",
        type=float,
        default=None,
        help="ssh tail -F window after the console's (default: measured in the console's "
        "window, side by side)",
    )
    parser.add_argument("--core-s", type=float, default=90.0, help="core-only window (0: skip)")
    parser.add_argument("--freshness-s", type=float, default=15.0, help="log-pane watch window")
    parser.add_argument("--serve-core", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument(
        "--serve-demo",
        nargs=5,
        metavar=("DIR", "RUNS", "INTERVAL", "MODE", "BACKFILL"),
        help=argparse.SUPPRESS,
    )
    args = parser.parse_args()
    if args.serve_core:
        serve_core(Path(args.serve_core[0]), float(args.serve_core[1]))
        return 0
    if args.serve_demo:
        d, runs, interval, mode, backfill = args.serve_demo
        serve_demo(Path(d), int(runs), float(interval), mode, int(backfill))
        return 0
    if shutil.which("tmux") is None or shutil.which("ssh") is None:
        print("needs tmux and an OpenSSH client", file=sys.stderr)
        return 2

    base = Path(tempfile.mkdtemp(prefix="dflash-ui-idle-"))
    interval = 1.0 / args.lines_per_s
    mode = "stalled" if args.quiet_runs else "healthy"
    together = args.baseline_s is None
    demo = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--serve-demo",
            str(base / "demo"),
            str(args.runs),
            str(interval),
            mode,
            str(args.backfill_lines),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    tmux = Tmux("console")
    tails = Tmux("tails")
    core: subprocess.Popen[bytes] | None = None
    gaps: list[float] = []
    try:
        assert demo.stdout is not None
        config = Path(demo.stdout.readline().strip())
        workspace = base / "demo" / "trainbox" / "ct200" / "workspace"
        logs = [workspace / f"train_run{i:02d}.log" for i in range(args.runs)]
        if args.quiet_runs:
            print(f"demo: {args.runs} runs, alive and quiet (no new lines); config {config}")
        else:
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
        shown = " stalled " if args.quiet_runs else " alive "
        while time.monotonic() < deadline:
            screen = tmux("capture-pane", "-p", "-t", "console")
            if sum(1 for line in screen.splitlines() if shown in line) >= min(args.runs, 8):
                break
            time.sleep(1)
        else:
            print(f"the console did not show the runs{shown}within 120 s:\n" + screen)
            return 1
        print(f"console pid {pid} follows every run; warming up {args.warmup_s:g} s")
        ssh_pids = start_tails(tails, base, config, logs) if together else []
        time.sleep(args.warmup_s)
        server = tmux.server_pid()
        tails_server = tails.server_pid() if together else 0
        lines0 = count_lines(logs)
        window_s = args.minutes * 60
        load0 = os.getloadavg()[0]
        if together:
            # Side by side: every process's CPU time over the same wall window, so a
            # neighbour's load on the shared cores weighs on both sides alike.
            groups = {"console": [pid], "tmux": [server], "ssh": ssh_pids, "tails": [tails_server]}
            t0 = time.monotonic()
            c0 = {k: sum(cpu_s(p) for p in v) for k, v in groups.items()}
            console_m = measure([pid], window_s, args.sample_s, rss_of=pid)
            wall = time.monotonic() - t0
            pct = {k: 100 * (sum(cpu_s(p) for p in v) - c0[k]) / wall for k, v in groups.items()}
            console_m["cpu_pct"] = pct["console"]
            tmux_m = {"cpu_pct": pct["tmux"]}
            ssh_m = {"cpu_pct": pct["ssh"]}
            tails_tmux_m = {"cpu_pct": pct["tails"]}
        else:
            console_m = measure([pid], window_s, args.sample_s, rss_of=pid)
            # tmux's share while it showed the console: measured in a short second window.
            tmux_m = measure([server], min(30.0, window_s), args.sample_s, rss_of=None)
        lines_per_s = (count_lines(logs) - lines0) / console_m["wall_s"]
        load1 = os.getloadavg()[0]
        if not args.quiet_runs and args.freshness_s > 0:
            gaps = log_gaps(tmux, args.freshness_s)
        tmux("send-keys", "-t", "console", "q")
        time.sleep(3)
        tmux.kill()

        # ---- the same core (monitor, jobs) without the UI, for attribution
        core_m = None
        if args.core_s > 0:
            core = subprocess.Popen(
                [sys.executable, __file__, "--serve-core", str(config), str(args.core_s + 60)]
            )
            time.sleep(min(args.warmup_s, 30.0) + 15)
            core_m = measure([core.pid], args.core_s, args.sample_s, rss_of=core.pid)
            core.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                core.wait(15)

        # ---- what an operator would run instead, after the console (--baseline-s)
        if not together:
            ssh_pids = start_tails(tails, base, config, logs)
            ssh_m = measure(ssh_pids, args.baseline_s, args.sample_s, rss_of=None)
            tails_tmux_m = measure(
                [tails.server_pid()], min(30.0, args.baseline_s), args.sample_s, rss_of=None
            )
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return 1
    finally:
        if core is not None and core.poll() is None:
            core.kill()
        tmux.kill()
        tails.kill()
        demo.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            demo.wait(30)
        shutil.rmtree(base, ignore_errors=True)

    rss = console_m["rss"]
    slope_all = slope_per_h(rss)
    slope = slope_per_h(rss[len(rss) // 2 :])  # after the histories have had time to fill
    cpu = console_m["cpu_pct"]
    ratio = cpu / ssh_m["cpu_pct"] if ssh_m["cpu_pct"] > 0 else float("inf")
    ours = cpu + tmux_m["cpu_pct"]
    theirs = ssh_m["cpu_pct"] + tails_tmux_m["cpu_pct"]
    ratio_tmux = ours / theirs if theirs > 0 else float("inf")
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
    if core_m is not None:
        print(
            f"  of which the core (session without UI, own process): CPU "
            f"{core_m['cpu_pct']:5.2f}%, RSS {core_m['rss'][0][1]:.1f} -> "
            f"{core_m['rss'][-1][1]:.1f} MiB in {core_m['wall_s']:.0f} s"
        )
    print(
        f"ssh tail -F x{len(ssh_pids)} (tmux windows): CPU {ssh_m['cpu_pct']:5.2f}% "
        f"(ssh clients), tmux server {tails_tmux_m['cpu_pct']:.2f}%"
    )
    print(f"ratio dflash-tui / ssh tails:    {ratio:.2f}x")
    print(
        f"ratio with tmux (dflash-tui + its tmux / ssh tails + their tmux): {ratio_tmux:.2f}x "
        f"({ours:.2f}% against {theirs:.2f}%, "
        f"{'the same window' if together else 'windows one after the other'}, "
        f"load average {load0:.2f} -> {load1:.2f})"
    )
    if gaps:
        print(
            f"log pane: new lines shown {len(gaps) - 1} times in {args.freshness_s:g} s, "
            f"longest gap {max(gaps):.2f} s"
        )
    if args.quiet_runs:
        ok_cpu = cpu <= GOAL_QUIET_CPU_PCT
        print(
            f"goal CPU <= {GOAL_QUIET_CPU_PCT:g}% of one core with every run quiet: "
            f"{'PASS' if ok_cpu else 'FAIL'}"
        )
    else:
        print(
            f"goal CPU < {GOAL_CPU_PCT:g}% of one core: "
            f"{'PASS' if cpu < GOAL_CPU_PCT else 'FAIL'} (the earlier goal; see the ratio)"
        )
        # At least once a second on average over the watch (the beat is 1 s; on a
        # loaded machine one frame can come late, so the longest gap is printed too).
        ok_fresh = len(gaps) - 1 >= 0.95 * args.freshness_s / GOAL_LOG_GAP_S
        ok_cpu = ratio_tmux <= GOAL_RATIO_TMUX and (ok_fresh or args.freshness_s <= 0)
        print(
            f"goal with tmux <= {GOAL_RATIO_TMUX:g}x the ssh tails: "
            f"{'PASS' if ratio_tmux <= GOAL_RATIO_TMUX else 'FAIL'}"
        )
        if args.freshness_s > 0:
            print(
                f"goal new log lines shown at least every {GOAL_LOG_GAP_S:g} s: "
                f"{'PASS' if ok_fresh else 'FAIL'}"
            )
    ok_rss = abs(slope) < GOAL_RSS_MIB_PER_H
    print(
        f"goal memory flat (|slope| < {GOAL_RSS_MIB_PER_H:g} MiB/h, second half): "
        f"{'PASS' if ok_rss else 'FAIL'}"
    )
    return 0 if ok_cpu and ok_rss else 1


if __name__ == "__main__":
    sys.exit(main())
