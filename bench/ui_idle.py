"""The console at rest: CPU and memory of `dflash-tui` watching ten busy runs, in tmux,
watched and unwatched, against the ssh tails it replaces, in one run.

Starts a demo cluster (in its own process) with N healthy runs that each log
L lines a second (default 10 x 5), opens the real console on it inside a
private tmux server at 160x48 with `focus-events on` and a client attached
(the client runs in a third tmux server that stands in for the operator's
terminal), and what an operator would run instead: one `ssh host tail -F LOG`
per run in the windows of another tmux server, with a client attached the same
way (OpenSSH client, the pct shim, the same logs). Then it alternates rounds of
`--round-s`: "watched" shows the console's window, "unwatched" shows a second
window of its session (tmux sends the console a focus-out report). Every
process's CPU time is read at each round's edges, so both states and the tails
share the same stretches of a loaded machine. Each side counts its own
processes: the console + its tmux server + its client, against the ssh clients
+ their tmux server + their client; the viewer's server is in neither.

Freshness, after the rounds: how often new log lines show while watched
(`--freshness-s`), that the pane's text does not change while unwatched, and
how long after the window is shown again the pane shows the new lines (the
goal: 200 ms). Last, the console's core alone (no UI) for attribution.

Prints CPU as a percentage of one core (process CPU time / wall time), RSS at
start and end and its least-squares slope per hour, and the ratios to the
ssh tails, against the goals (docs/console.md "Painting only when watched"):
watched at most 2.42x (the soak's figure before the console stopped painting
unwatched), unwatched at most 1.0x, new log lines on screen at least once a
second, memory flat; with `--quiet-runs` (every run alive, no new lines) at
most 0.5% of one core watched.

    .venv/bin/python bench/ui_idle.py                 # 4 minutes measured, 2 per state
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
GOAL_RATIO_WATCHED = 2.42  # console + its tmux against ten ssh tails + theirs (the soak's)
GOAL_RATIO_UNWATCHED = 1.0
GOAL_FOCUS_S = 0.2  # shown again: the new lines are on screen within this
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
    """A private tmux server (own socket; no user config, only `focus-events on`)."""

    def __init__(self, name: str, conf: Path) -> None:
        self.socket = f"dflash-bench-{os.getpid()}-{name}"
        self.conf = conf
        self.env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TMUX")}

    def __call__(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-L", self.socket, "-f", str(self.conf), *args],
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

    def attach_from(self, viewer: Tmux, session: str) -> int:
        """Attach a client to `session`, running in a window of `viewer` (a terminal);
        returns the client's pid."""
        attach = f"tmux -L {self.socket} -f {self.conf} attach -t {session}"
        if viewer("list-sessions"):
            viewer("new-window", "-t", "viewer", attach)
        else:
            viewer("new-session", "-d", "-s", "viewer", "-x", "160", "-y", "48", attach)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            clients = [c for c in self("list-clients", "-F", "#{client_pid}").split() if c]
            if clients:
                return int(clients[0])
            time.sleep(0.2)
        raise RuntimeError(f"no tmux client attached to {session}")


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


def focus_delays(tmux: Tmux, times: int, away_s: float) -> tuple[list[float], int]:
    """Show the second window for `away_s`, then the console's again, `times` times:
    seconds from tmux's focus-in until its log pane is seen changed (polled with
    `capture-pane`, itself some ms on a loaded machine), and how often it changed unseen."""
    delays, changed_unseen = [], 0
    for _ in range(times):
        tmux("select-window", "-t", "console:1")
        time.sleep(0.5)  # the focus report on its way
        frozen = log_region(tmux("capture-pane", "-p", "-t", "console:0"))
        time.sleep(away_s)
        if log_region(tmux("capture-pane", "-p", "-t", "console:0")) != frozen:
            changed_unseen += 1
        tmux("select-window", "-t", "console:0")  # tmux sent the focus-in before it returned
        t0 = time.monotonic()
        while time.monotonic() < t0 + 5:
            if log_region(tmux("capture-pane", "-p", "-t", "console:0")) != frozen:
                delays.append(time.monotonic() - t0)
                break
            time.sleep(0.01)
        else:
            delays.append(float("inf"))
        time.sleep(1.5)
    return delays, changed_unseen


def log_gaps(tmux: Tmux, seconds: float, every_s: float = 0.1) -> list[float]:
    """Seconds between changes of the log pane's text (and from the start and to the end
    of the watch), watched for `seconds`: the longest is how stale the log got."""
    start = time.monotonic()
    marks = [start]
    last = log_region(tmux("capture-pane", "-p", "-t", "console:0"))
    while time.monotonic() < start + seconds:
        time.sleep(every_s)
        region = log_region(tmux("capture-pane", "-p", "-t", "console:0"))
        if region != last:
            marks.append(time.monotonic())
        last = region
    marks.append(time.monotonic())
    return [b - a for a, b in itertools.pairwise(marks)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--minutes", type=float, default=4.0, help="measuring window, both states (60: the hour)"
    )
    parser.add_argument(
        "--round-s", type=float, default=20.0, help="one watched or unwatched round"
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
    parser.add_argument("--core-s", type=float, default=90.0, help="core-only window (0: skip)")
    parser.add_argument("--freshness-s", type=float, default=15.0, help="log-pane watch window")
    parser.add_argument("--focus-times", type=int, default=5, help="unwatched, then shown again")
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
    conf = base / "tmux.conf"
    conf.write_text("set -g focus-events on\n")
    interval = 1.0 / args.lines_per_s
    mode = "stalled" if args.quiet_runs else "healthy"
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
    tmux = Tmux("console", conf)
    tails = Tmux("tails", conf)
    # The viewer stands in for the operator's terminal, which has focus: it sends its
    # clients no focus reports (no focus-events), so they stay focused.
    viewer = Tmux("viewer", Path("/dev/null"))
    core: subprocess.Popen[bytes] | None = None
    gaps: list[float] = []
    delays: list[float] = []
    changed_unseen = 0
    try:
        assert demo.stdout is not None
        config = Path(demo.stdout.readline().strip())
        workspace = base / "demo" / "trainbox" / "ct200" / "workspace"
        logs = [workspace / f"train_run{i:02d}.log" for i in range(args.runs)]
        if args.quiet_runs:
            print(f"demo: {args.runs} runs, alive and quiet (no new lines); config {config}")
        else:
            print(f"demo: {args.runs} runs at {args.lines_per_s:g} lines/s each; config {config}")

        # ---- the console, in tmux at 160x48, a client attached; window 1: something else
        console = (
            f"env -u COLUMNS -u LINES TERM=tmux-256color {sys.executable} -m dflash_tui "
            f"--config {config}"
        )
        tmux("new-session", "-d", "-s", "console", "-x", "160", "-y", "48", console)
        tmux("new-window", "-d", "-t", "console:1", "cat")
        pane = tmux.pane_pid("console:0")
        pid = next((p for p in [pane, *descendants(pane)] if "dflash_tui" in cmdline(p)), pane)
        client = tmux.attach_from(viewer, "console")
        deadline = time.monotonic() + 120
        shown = " stalled " if args.quiet_runs else " alive "
        while time.monotonic() < deadline:
            screen = tmux("capture-pane", "-p", "-t", "console:0")
            if sum(1 for line in screen.splitlines() if shown in line) >= min(args.runs, 8):
                break
            time.sleep(1)
        else:
            print(f"the console did not show the runs{shown}within 120 s:\n" + screen)
            return 1
        print(f"console pid {pid} follows every run; warming up {args.warmup_s:g} s")
        ssh_pids = start_tails(tails, base, config, logs)
        tails_client = tails.attach_from(viewer, "tails")
        time.sleep(args.warmup_s)
        groups = {
            "console": [pid],
            "tmux": [tmux.server_pid(), client],
            "ssh": ssh_pids,
            "tails": [tails.server_pid(), tails_client],
        }
        lines0 = count_lines(logs)
        load0 = os.getloadavg()[0]
        # Alternating rounds: watched, unwatched, ...; CPU seconds and wall per state.
        used = {state: dict.fromkeys(groups, 0.0) for state in ("watched", "unwatched")}
        walls = dict.fromkeys(used, 0.0)
        rss: list[tuple[float, float]] = []
        t_start = time.monotonic()
        rounds = max(2, round(args.minutes * 60 / args.round_s))
        for n in range(rounds):
            state = "watched" if n % 2 == 0 else "unwatched"
            tmux("select-window", "-t", "console:0" if state == "watched" else "console:1")
            t0 = time.monotonic()
            c0 = {k: sum(cpu_s(p) for p in v) for k, v in groups.items()}
            m = measure([], args.round_s, args.sample_s, rss_of=pid)
            rss += [(t0 - t_start + t, v) for t, v in m["rss"]]
            walls[state] += time.monotonic() - t0
            for k, v in groups.items():
                used[state][k] += sum(cpu_s(p) for p in v) - c0[k]
        tmux("select-window", "-t", "console:0")
        wall_all = sum(walls.values())
        lines_per_s = (count_lines(logs) - lines0) / (time.monotonic() - t_start)
        load1 = os.getloadavg()[0]
        if not args.quiet_runs and args.freshness_s > 0:
            time.sleep(2)
            gaps = log_gaps(tmux, args.freshness_s)
            delays, changed_unseen = focus_delays(tmux, args.focus_times, away_s=3.0)
        tmux("send-keys", "-t", "console:0", "q")
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
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return 1
    finally:
        if core is not None and core.poll() is None:
            core.kill()
        for server in (tmux, tails, viewer):
            server.kill()
        demo.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            demo.wait(30)
        shutil.rmtree(base, ignore_errors=True)

    def pct(state: str, *names: str) -> float:
        return 100 * sum(used[state][k] for k in names) / walls[state]

    slope_all = slope_per_h(rss)
    slope = slope_per_h(rss[len(rss) // 2 :])  # after the histories have had time to fill
    print()
    print(f"machine: {os.cpu_count()} cores, load average {load0:.2f} -> {load1:.2f}")
    print(
        f"window: {wall_all:.0f} s in {rounds} alternating rounds of {args.round_s:g} s "
        f"(watched first), logs grew {lines_per_s:.1f} lines/s in total"
    )
    print(
        f"{'% of one core':<34}{'console':>9}{'its tmux':>10}{'together':>10}"
        f"{'ssh tails':>11}{'their tmux':>12}{'together':>10}{'ratio':>8}"
    )
    ratios = {}
    for state in ("watched", "unwatched"):
        ours, theirs = pct(state, "console", "tmux"), pct(state, "ssh", "tails")
        ratios[state] = ours / theirs if theirs > 0 else float("inf")
        print(
            f"{'dflash-tui ' + state + f' ({walls[state]:.0f} s)':<34}"
            f"{pct(state, 'console'):>9.2f}{pct(state, 'tmux'):>10.2f}{ours:>10.2f}"
            f"{pct(state, 'ssh'):>11.2f}{pct(state, 'tails'):>12.2f}{theirs:>10.2f}"
            f"{ratios[state]:>7.2f}x"
        )
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
    if gaps:
        print(
            f"freshness watched: new log lines shown {len(gaps) - 1} times in "
            f"{args.freshness_s:g} s, longest gap {max(gaps):.2f} s"
        )
    if delays:
        print(
            f"freshness unwatched: the log pane changed while not shown {changed_unseen} of "
            f"{len(delays)} times (3 s each); shown again, the new lines were on screen in "
            f"{', '.join(f'{d * 1000:.0f}' for d in delays)} ms (median "
            f"{sorted(delays)[len(delays) // 2] * 1000:.0f} ms)"
        )
    oks = []
    if args.quiet_runs:
        cpu = pct("watched", "console")
        oks.append(cpu <= GOAL_QUIET_CPU_PCT)
        print(
            f"goal CPU <= {GOAL_QUIET_CPU_PCT:g}% of one core watched, every run quiet: "
            f"{'PASS' if oks[-1] else 'FAIL'}"
        )
    else:
        oks.append(ratios["watched"] <= GOAL_RATIO_WATCHED)
        print(
            f"goal watched, with tmux <= {GOAL_RATIO_WATCHED:g}x the ssh tails: "
            f"{'PASS' if oks[-1] else 'FAIL'}"
        )
    oks.append(ratios["unwatched"] <= GOAL_RATIO_UNWATCHED)
    print(
        f"goal unwatched, with tmux <= {GOAL_RATIO_UNWATCHED:g}x the ssh tails: "
        f"{'PASS' if oks[-1] else 'FAIL'}"
    )
    if gaps:
        # At least once a second on average over the watch (the beat is 1 s; on a
        # loaded machine one frame can come late, so the longest gap is printed too).
        oks.append(len(gaps) - 1 >= 0.95 * args.freshness_s / GOAL_LOG_GAP_S)
        print(
            f"goal new log lines shown at least every {GOAL_LOG_GAP_S:g} s watched: "
            f"{'PASS' if oks[-1] else 'FAIL'}"
        )
    if delays:
        oks.append(changed_unseen == 0 and max(delays) <= GOAL_FOCUS_S)
        print(
            f"goal nothing painted unwatched, shown again within {GOAL_FOCUS_S * 1000:.0f} ms: "
            f"{'PASS' if oks[-1] else 'FAIL'}"
        )
    oks.append(abs(slope) < GOAL_RSS_MIB_PER_H)
    print(
        f"goal memory flat (|slope| < {GOAL_RSS_MIB_PER_H:g} MiB/h, second half): "
        f"{'PASS' if oks[-1] else 'FAIL'}"
    )
    return 0 if all(oks) else 1


if __name__ == "__main__":
    sys.exit(main())
