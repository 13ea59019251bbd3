"""Where a relay's CPU goes on a long link: CPU seconds per method for one copy.

The eval and train hosts in namespaces, a delay line of `--rtt-ms` and
`--rate-mbit` in front of train (bench/relay_netns.py), hosts with a 0.3 s login
shell; each method copies one file of `--size-mib` in alternating rounds (the
relay, spliced by default, and `forward`: `relay --splice off`) and the CPU it took is printed in three parts: this machine's processes (the relay and its
`ssh`, or `scp -3` / the pipe's `ssh`), both hosts' sshd trees (their sessions,
scripts and hashes: a real host's own CPU) and the delay line (the test bed's).

    .venv/bin/python bench/relay_cpu.py --rtt-ms 40 --size-mib 256 --rounds 2
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent)]

import relay_netns  # noqa: E402  # bench/relay_netns.py

TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int, *, reaped: bool) -> float:
    """A process's own CPU seconds, or (`reaped`) its finished children's."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    first = 13 if reaped else 11  # cutime, cstime / utime, stime
    return (int(fields[first]) + int(fields[first + 1])) * TICK_S


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rtt-ms", type=float, default=40.0)
    parser.add_argument("--rate-mbit", type=float, default=1000.0)
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="relay-cpu-"))
    link = relay_netns.LongLink(args.rtt_ms, args.rate_mbit, "train")
    bench = relay_netns.NetnsBench(work, None, prefix="dfc", long_link=link, bashrc="sleep 0.3\n")
    try:
        src = bench.src_dir / f"model-{args.size_mib}M.safetensors"
        relay_netns._write_random(src, args.size_mib << 20)
        print(f"{link.describe()}, {args.size_mib} MiB")
        for _ in range(args.rounds):
            for name in ("relay", "forward", "scp3", "pipe"):
                usage = resource.getrusage(resource.RUSAGE_CHILDREN)
                local0 = usage.ru_utime + usage.ru_stime
                hosts0 = sum(_cpu_s(h.process.pid, reaped=True) for h in bench.hosts if h.process)
                line0 = sum(_cpu_s(p.pid, reaped=False) for p in bench.delay_lines)
                if name == "forward":  # the streams' bytes through the relay's Python
                    elapsed, dst, _ = bench.relay(src, extra=["--splice", "off"])
                else:
                    elapsed, dst, _ = getattr(bench, name)(src)
                time.sleep(0.5)  # the hosts' sshd reap their finished sessions
                usage = resource.getrusage(resource.RUSAGE_CHILDREN)
                local = usage.ru_utime + usage.ru_stime - local0
                hosts = sum(_cpu_s(h.process.pid, reaped=True) for h in bench.hosts if h.process)
                line = sum(_cpu_s(p.pid, reaped=False) for p in bench.delay_lines) - line0
                dst.unlink()
                print(
                    f"{name:6s} {elapsed:6.2f} s  CPU: here {local:5.2f} s, hosts' sshd "
                    f"{hosts - hosts0:5.2f} s, delay line {line:5.2f} s  "
                    f"load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    finally:
        bench.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
