"""Loading a run's history: the console's host-side loader against `ssh host cat log | wc -l`.

Starts a real OpenSSH sshd on loopback (the test bed's SshdHost), writes a
demo-style training log of about 2 million lines (~220 MB) into its home,
and then, in interleaved rounds, times:

* the console's history load (`monitor.backlog.load_backlog` into a bounded
  `History`): a new pooled connection, the host-side script (grep filter,
  decimation of the older part, gzip), streaming decompression and parsing;
  the result is every step of the last 5000 and an even sample of the rest;
* `ssh host cat log | wc -l` with the OpenSSH client: the cheapest way an
  operator can even look at the whole file (it parses nothing);
* with `--naive`, once: `ssh host cat log` with every line parsed here into
  the same bounded History (what a loader without host-side filtering costs).

It prints the median seconds, the bytes that crossed the link, the peak
Python memory of one load (tracemalloc, separate run) and the ratios.

    .venv/bin/python bench/history.py               # ~2M lines, 3 rounds
    .venv/bin/python bench/history.py --blocks 500 --rounds 5 --naive
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from dflash_tui.core.config_parse import load_config  # noqa: E402
from dflash_tui.monitor.backlog import load_backlog  # noqa: E402
from dflash_tui.monitor.history import History  # noqa: E402
from dflash_tui.monitor.lines import LineSplitter, clean_line  # noqa: E402
from dflash_tui.monitor.metrics import MetricParser  # noqa: E402
from dflash_tui.remote.pool import HostPool  # noqa: E402
from tests.monitor.biglog import write_big_log  # noqa: E402
from tests.testbed import ClientKey, SshdHost, hosts_toml, sshd_host_entry  # noqa: E402


def _ssh(host: SshdHost, key: ClientKey, known: Path, command: str) -> list[str]:
    return [
        "ssh", "-q", "-p", str(host.port), "-i", str(key.private), "-o", "BatchMode=yes",
        "-o", f"UserKnownHostsFile={known}", "-o", "StrictHostKeyChecking=yes",
        f"root@{host.address}", command,
    ]  # fmt: skip


async def _ours(config_path: Path, log: Path) -> tuple[float, int, int, History, int]:
    history = History()
    started = time.perf_counter()
    async with HostPool(load_config(config_path)) as pool:
        backlog = await load_backlog(
            pool, "h", str(log), on_metrics=history.add, older_lines=4500, timeout_s=600
        )
    elapsed = time.perf_counter() - started
    moved = backlog.compressed_bytes + (backlog.position.offset - backlog.recent_start)
    return elapsed, moved, backlog.received_lines, history, backlog.step_lines


def _cat_wc(argv: list[str]) -> tuple[float, int]:
    started = time.perf_counter()
    out = subprocess.run(f"{subprocess.list2cmdline(argv)} | wc -l", shell=True, check=True,
                         capture_output=True, text=True)  # fmt: skip
    return time.perf_counter() - started, int(out.stdout.strip())


def _naive(argv: list[str]) -> tuple[float, int]:
    """Stream the whole log and parse every line here (bounded History, no host-side work)."""
    parser, history, splitter = MetricParser(), History(), LineSplitter(0)
    started = time.perf_counter()
    with subprocess.Popen(argv, stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        while chunk := proc.stdout.read(1 << 20):
            for raw in splitter.feed(chunk):
                metrics = parser.parse(clean_line(raw.data))
                if metrics is not None:
                    history.add(metrics)
    return time.perf_counter() - started, len(history)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--blocks", type=int, default=2000, help="thousands of lines (default 2000)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--naive", action="store_true", help="also time parsing every line here")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-history-") as tmp:
        base = Path(tmp)
        key = ClientKey.generate(base / "key")
        host = SshdHost(root=base / "sshd", client_key=key).start()
        try:
            known = base / "known_hosts"
            known.write_text(host.known_hosts_line())
            config = hosts_toml(base / "hosts.toml", {"h": sshd_host_entry(host, key)},
                                known_hosts=known)  # fmt: skip
            log = host.home / "train.log"
            t0 = time.perf_counter()
            size = write_big_log(log, args.blocks)
            lines = sum(1 for _ in log.open("rb"))
            print(f"log: {lines:,} lines, {size / 1e6:.0f} MB (written in "
                  f"{time.perf_counter() - t0:.1f}s); sshd on {host.address}:{host.port}")  # fmt: skip
            cat_argv = _ssh(host, key, known, f"cat {log}")

            ours: list[float] = []
            cats: list[float] = []
            for _ in range(args.rounds):
                elapsed, moved, received, history, step_lines = asyncio.run(_ours(config, log))
                ours.append(elapsed)
                cat_s, counted = _cat_wc(cat_argv)
                assert counted == lines, (counted, lines)
                cats.append(cat_s)

            tracemalloc.start()
            asyncio.run(_ours(config, log))
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()

            steps = [p.step for p in history.points()]
            ours_s, cat_s = statistics.median(ours), statistics.median(cats)
            print(f"\nrounds: {args.rounds} (median shown)")
            print(f"{'method':52} {'seconds':>8} {'MB over ssh':>12}")
            print(f"{'dflash-tui history load (filter+decimate+gzip)':52} {ours_s:8.2f} "
                  f"{moved / 1e6:12.2f}")  # fmt: skip
            print(f"{'ssh host cat log | wc -l':52} {cat_s:8.2f} {size / 1e6:12.2f}")
            if args.naive:
                naive_s, _ = _naive(cat_argv)
                print(f"{'ssh host cat log, every line parsed here (1 run)':52} {naive_s:8.2f} "
                      f"{size / 1e6:12.2f}")  # fmt: skip
            print(f"\nhistory: {len(history):,} points kept (steps {steps[0]}..{steps[-1]}, "
                  f"last 5000 complete), {received:,} lines received of ~{step_lines:,} step "
                  f"lines; peak Python memory of a load {peak / 1e6:.1f} MB")  # fmt: skip
            print(f"ratio: history load / (cat | wc -l) = {ours_s / cat_s:.2f}x")
            if args.naive:
                print(f"ratio: naive parse-everything / history load = {naive_s / ours_s:.1f}x")
        finally:
            host.stop()


if __name__ == "__main__":
    main()
