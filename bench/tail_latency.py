"""Log tail latency: from a line appended on the host to its batch at the consumer.

Starts a real OpenSSH sshd on loopback (the test bed's SshdHost) and follows
one log two ways at the same time:

* the console's `LogTail` over a pooled asyncssh connection (byte-offset
  resume, rotation and truncation handling, lines in batches);
* `ssh host tail -F log` with the OpenSSH client, read line by line.

A writer appends numbered lines at random intervals (20-200 ms, with a few
bursts), noting when each write returned. Each consumer notes when each line
reached it (for LogTail: when its batch was handed out). It prints the median
and p99 latency of both, and the ratio; both consumers must see every line.

    .venv/bin/python bench/tail_latency.py                 # 300 lines, default poll 0.1 s
    .venv/bin/python bench/tail_latency.py --lines 500 --poll 0.05
    .venv/bin/python bench/tail_latency.py --gather 1     # a run whose log is not on screen
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from dflash_tui.core.config_parse import load_config  # noqa: E402
from dflash_tui.monitor.tail import LogTail  # noqa: E402
from dflash_tui.remote.pool import HostPool  # noqa: E402
from tests.testbed import ClientKey, SshdHost, hosts_toml, sshd_host_entry  # noqa: E402


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def run(args: argparse.Namespace, host: SshdHost, key: ClientKey, base: Path) -> None:
    known = base / "known_hosts"
    known.write_text(host.known_hosts_line())
    config = hosts_toml(base / "hosts.toml", {"h": sshd_host_entry(host, key)}, known_hosts=known)
    log = host.home / "train.log"
    log.write_text("")
    written: dict[int, float] = {}
    ours: dict[int, float] = {}
    theirs: dict[int, float] = {}

    ssh = await asyncio.create_subprocess_exec(
        "ssh", "-q", "-p", str(host.port), "-i", str(key.private), "-o", "BatchMode=yes",
        "-o", f"UserKnownHostsFile={known}", "-o", "StrictHostKeyChecking=yes",
        f"root@{host.address}", f"tail -n 0 -F {log}",
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip

    async def read_ssh() -> None:
        assert ssh.stdout is not None
        while line := await ssh.stdout.readline():
            theirs[int(line.split()[1])] = time.monotonic()

    async with HostPool(load_config(config)) as pool:
        tail = LogTail(
            pool, "h", str(log), poll_s=args.poll, batch_s=args.batch, gather_s=args.gather
        )

        async def read_ours() -> None:
            async for batch in tail:
                now = time.monotonic()
                for line in batch.lines:
                    ours[int(line.text.split()[1])] = now

        readers = [asyncio.create_task(read_ssh()), asyncio.create_task(read_ours())]
        await asyncio.sleep(2.0)  # both connected and idle
        rng = random.Random(7)
        with log.open("a") as f:
            for i in range(args.lines):
                burst = i % 50 == 49
                f.write(f"step {i} loss {1 / (i + 1):.5f} acc 0.5 | {time.time():.3f}\n")
                f.flush()
                written[i] = time.monotonic()
                await asyncio.sleep(0.002 if burst else rng.uniform(0.02, 0.2))
        deadline = time.monotonic() + 15
        while (len(ours) < args.lines or len(theirs) < args.lines) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await tail.aclose()
        ssh.terminate()
        for task in readers:
            task.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        await ssh.wait()

    assert len(ours) == args.lines, f"LogTail saw {len(ours)} of {args.lines}"
    assert len(theirs) == args.lines, f"ssh tail -F saw {len(theirs)} of {args.lines}"
    lat_ours = [(ours[i] - written[i]) * 1000 for i in written]
    lat_theirs = [(theirs[i] - written[i]) * 1000 for i in written]
    med_o, med_t = statistics.median(lat_ours), statistics.median(lat_theirs)
    p99_o, p99_t = _pct(lat_ours, 0.99), _pct(lat_theirs, 0.99)
    print(f"{args.lines} lines, LogTail poll {args.poll:g}s / batch {args.batch:g}s; "
          f"sshd on {host.address}:{host.port}")  # fmt: skip
    print(f"{'consumer':34} {'median ms':>10} {'p99 ms':>8}")
    print(f"{'dflash-tui LogTail (batched)':34} {med_o:10.1f} {p99_o:8.1f}")
    print(f"{'ssh host tail -F':34} {med_t:10.1f} {p99_t:8.1f}")
    print(f"ratio LogTail / tail -F: median {med_o / med_t:.1f}x, p99 {p99_o / p99_t:.1f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, default=300)
    ap.add_argument("--poll", type=float, default=0.1, help="LogTail poll_s (default 0.1)")
    ap.add_argument("--batch", type=float, default=0.075, help="LogTail batch_s (default 0.075)")
    ap.add_argument(
        "--gather",
        type=float,
        default=0.0,
        help="LogTail gather_s: 0 as for the run on screen, 1 as for the console's other runs",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-tail-") as tmp:
        base = Path(tmp)
        key = ClientKey.generate(base / "key")
        host = SshdHost(root=base / "sshd", client_key=key).start()
        try:
            asyncio.run(run(args, host, key, base))
        finally:
            host.stop()


if __name__ == "__main__":
    main()
