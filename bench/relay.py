"""Relay throughput: `dflash-tui relay` against `scp -3` and a two-ssh pipe, side by side.

Starts two real OpenSSH sshd hosts on loopback (the test bed's SshdHost),
writes one incompressible file (1 GiB by default) on host A, then copies it
to host B with each method in turn, for several interleaved rounds (so load
from other processes hits all methods alike), and prints the median time,
MB/s and the ratios. Every copy is checked by sha256 afterwards; a wrong copy
aborts the benchmark.

* `dflash-tui relay a:SRC b:DST` (the CLI as an operator runs it: AES-GCM,
  ranges hashed at both ends, whole-file sha256 at both ends, .part + rename);
* `scp -3 scp://a/SRC scp://b/DST` (OpenSSH defaults, no verification);
* `ssh a cat SRC | ssh b 'cat > DST'` (OpenSSH defaults, no verification);
* with `--methods ...,scp3v`: `scp -3`, then `sha256sum` on A and on B at once
  (what it takes to know an scp copy is right);
* with `--methods ...,pipev`: the two-ssh pipe plus the relay's checks (source
  sha256 while copying, destination sha256 of NAME.part, rename): what moving
  the bytes through OpenSSH clients instead of asyncssh would give;
* with `--methods ...,direct`: `dflash-tui relay --direct`, where B pulls from A
  with its own ssh (not through this machine; needs B to reach A).

Besides wall time it reports the CPU seconds each method used on the whole
machine (both sshd trees and the local processes), which is steadier than
throughput when other jobs share the cores.

    .venv/bin/python bench/relay.py                 # 1 GiB, 3 rounds
    .venv/bin/python bench/relay.py --size-mib 256 --rounds 1

`--netns` measures through a real jump host instead: the eval and train hosts
are sshd in two network namespaces that reach only this machine (the root
namespace, where the console runs), no route between them (see
tests/transfer/netns.py). Files of each `--sizes` size and a results tree of
200 small files go eval -> train with the relay, `scp -3` (`-r` for the tree)
and, for files, `ssh eval cat | ssh train 'cat >'`, alternating within each
round; medians per method and ratios. The namespaces go on exit, Ctrl-C too.

    .venv/bin/python bench/relay.py --netns --sizes 1M,256M,1G,tree --rounds 5
    .venv/bin/python bench/relay.py --netns --sizes 1M,tree --rounds 2   # short

The hosts run `python3` from their PATH (as sshd sets it), as a stranger's
hosts would; `--host-python PATH` puts another one first on that PATH, and
`--slow-python` a wrapper that sleeps 0.15 s before it execs the real one (as
a pyenv shim or a module-loading wrapper does on many GPU boxes). The load
average is printed before, after and with every round.

    .venv/bin/python bench/relay.py --netns --sizes 1M,256M,tree --slow-python

GPU boxes' login shells are slow: sshd runs every command (and an external
sftp-server) through the user's shell, which sources ~/.bashrc, where conda's
or pyenv's init block often costs 0.2-0.5 s. `--login-shell-s S` gives the
hosts' user a .bashrc that costs S seconds (a sleep, so the cost is the same
every time); `--login-shell pyenv` one with a real `pyenv init` (when pyenv is
installed here). The sshd logs count the sessions each relay starts (commands
and subsystems): printed per item as "sessions per relay".

    .venv/bin/python bench/relay.py --netns --sizes 1M,tree --login-shell-s 0.3

The hosts serve SFTP as stock Debian/Ubuntu hosts do, with
/usr/lib/openssh/sftp-server started through the login shell (so an SFTP
session pays ~/.bashrc too; the header line times one); `--sftp-server
internal` gives them sshd's internal-sftp, which starts no shell, as the test
bed does. `--pipe-hashed` adds the pipe with sha256 on both hosts in the same
pass (`tee` into the hash, compared here, no rename) and the relay's ciphers
(AES-GCM; `scp -3` and the plain pipe keep OpenSSH's defaults): the floor of
any verified copy through OpenSSH on these hosts, to tell the relay's own
overhead from the cost of the verification.

`--rtt-ms R --rate-mbit M` gives the train host (`--long-legs eval|both`: the
other or both) a long link: a delay line of the test bed's own
(tests/transfer/delay_line.py) in this machine's namespace holds each
direction's bytes R/2 ms and paces them to M; the table adds the file's time at
the link's rate. `--variant NAME=ARGS` times `relay ARGS` in the same rounds
(e.g. `legs1=--long-streams 1`), `--cut-at 0.5` a relay whose train sessions are
all killed half way (it prints what it sent against the file's size), and the
`tree256` item is 200 files of 8-256 KB. The --netns half lives in
bench/relay_netns.py.

    .venv/bin/python bench/relay.py --netns --sizes 1G,tree --rounds 3 \
        --rtt-ms 40 --rate-mbit 1000 --login-shell-s 0.3 --cut-at 0.5
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from relay_netns import (  # noqa: E402  # bench/relay_netns.py
    MB,
    NETNS_PREFIX,
    SLOW_PYTHON_S,
    _write_random,
    netns_main,
)

from tests.testbed import (  # noqa: E402
    ClientKey,
    SshdHost,
    hosts_toml,
    sha256_file,
    sshd_host_entry,
)
from tests.transfer.hosts import HomeSshdHost, make_ssh_home  # noqa: E402

TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def _tree_cpu_s(pid: int) -> float:
    """CPU seconds of the finished descendants that `pid` has reaped (utime+stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) * TICK_S


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Bench:
    def __init__(self, work: Path, size: int, streams: int | None) -> None:
        self.work = work
        self.size = size
        self.streams = streams
        key = ClientKey.generate(work / "key")
        self.key = key
        self.a = SshdHost(work / "a", key).start()
        # B's sessions get their own /root with a key and known_hosts entry for A,
        # so `relay --direct` (B pulls from A with its own ssh) can be measured too.
        self.b = HomeSshdHost(
            work / "b", key, ssh_home=make_ssh_home(work / "b-root", key, self.a)
        ).start()
        self.known = work / "known_hosts"
        self.known.write_text(self.a.known_hosts_line() + self.b.known_hosts_line())
        self.config = hosts_toml(
            work / "hosts.toml",
            {"a": sshd_host_entry(self.a, key), "b": sshd_host_entry(self.b, key)},
            known_hosts=self.known,
        )
        self.src = work / "a-data" / "model.safetensors"
        self.src.parent.mkdir()
        (work / "b-data").mkdir()
        print(f"writing {size / MB:.0f} MB of random bytes to {self.src} ...", flush=True)
        self.sha = _write_random(self.src, size)
        self.run_no = 0

    def cpu_s(self) -> float:
        """CPU used so far by both sshd trees (finished sessions) and our finished children."""
        assert self.a.process is not None and self.b.process is not None
        return _tree_cpu_s(self.a.process.pid) + _tree_cpu_s(self.b.process.pid) + _children_cpu_s()

    def close(self) -> None:
        self.a.stop()
        self.b.stop()

    def _ssh(self, host: SshdHost) -> list[str]:
        return [
            "ssh",
            "-o",
            "BatchMode=yes",
            "-o",
            f"UserKnownHostsFile={self.known}",
            "-i",
            str(self.key.private),
            "-p",
            str(host.port),
            "root@127.0.0.1",
        ]

    def _dst(self) -> Path:
        self.run_no += 1
        return self.work / "b-data" / f"copy{self.run_no}.bin"

    def relay(self, *extra: str) -> tuple[float, Path]:
        dst = self._dst()
        cmd = [
            str(ROOT / ".venv" / "bin" / "dflash-tui"),
            "relay",
            "--config",
            str(self.config),
            "--json",
            f"a:{self.src}",
            f"b:{dst}",
        ]
        if self.streams:
            cmd += ["--streams", str(self.streams)]
        cmd += extra
        started = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True)
        elapsed = time.perf_counter() - started
        if out.returncode != 0:
            raise SystemExit(f"relay failed: {out.stderr or out.stdout[-2000:]}")
        verified = [json.loads(x) for x in out.stdout.splitlines() if '"file_verified"' in x]
        assert verified and verified[0]["sha256_src"] == verified[0]["sha256_dst"] == self.sha
        return elapsed, dst

    def direct(self) -> tuple[float, Path]:
        return self.relay("--direct")

    def scp3(self) -> tuple[float, Path]:
        dst = self._dst()
        cmd = [
            "scp",
            "-3",
            "-q",
            "-o",
            "BatchMode=yes",
            "-o",
            f"UserKnownHostsFile={self.known}",
            "-i",
            str(self.key.private),
            f"scp://root@127.0.0.1:{self.a.port}/{self.src}",
            f"scp://root@127.0.0.1:{self.b.port}/{dst}",
        ]
        started = time.perf_counter()
        subprocess.run(cmd, check=True)
        return time.perf_counter() - started, dst

    def scp3_verified(self) -> tuple[float, Path]:
        """scp -3, then `sha256sum` at both ends (in parallel), as a careful operator would."""
        started = time.perf_counter()
        _, dst = self.scp3()
        checks = [
            subprocess.Popen([*self._ssh(host), f"sha256sum '{path}'"], stdout=subprocess.PIPE)
            for host, path in ((self.a, self.src), (self.b, dst))
        ]
        sums = {c.communicate()[0].split()[0].decode() for c in checks}
        if sums != {self.sha}:
            raise SystemExit(f"scp -3 copy does not match: {sums}")
        return time.perf_counter() - started, dst

    def pipe_verified(self) -> tuple[float, Path]:
        """The two-ssh pipe plus the relay's checks: what an OpenSSH-client data path would do.

        Source sha256 while copying, destination sha256 of NAME.part after
        writing, compare, rename. Not something dflash-tui ships: its design
        keeps every SSH connection in the pool. Measured to show the cost of
        moving the bytes through Python (asyncssh) instead of through OpenSSH.
        """
        dst = self._dst()
        part = f"{dst}.part"
        started = time.perf_counter()
        src_hash = subprocess.Popen(
            [*self._ssh(self.a), f"openssl dgst -sha256 -r '{self.src}'"], stdout=subprocess.PIPE
        )
        reader = subprocess.Popen(
            [*self._ssh(self.a), f"dd if='{self.src}' bs=256K status=none"],
            stdout=subprocess.PIPE,
        )
        writer = subprocess.Popen(
            [
                *self._ssh(self.b),
                f"dd of='{part}' bs=256K status=none && openssl dgst -sha256 -r '{part}'",
            ],
            stdin=reader.stdout,
            stdout=subprocess.PIPE,
        )
        assert reader.stdout is not None
        reader.stdout.close()
        dst_sha = writer.communicate()[0].split()[0].decode()
        src_sha = src_hash.communicate()[0].split()[0].decode()
        if reader.wait() != 0 or src_sha != dst_sha:
            raise SystemExit("ssh pipe copy does not match")
        subprocess.run([*self._ssh(self.b), f"mv '{part}' '{dst}'"], check=True)
        return time.perf_counter() - started, dst

    def pipe(self) -> tuple[float, Path]:
        dst = self._dst()
        started = time.perf_counter()
        reader = subprocess.Popen([*self._ssh(self.a), f"cat '{self.src}'"], stdout=subprocess.PIPE)
        writer = subprocess.Popen([*self._ssh(self.b), f"cat > '{dst}'"], stdin=reader.stdout)
        assert reader.stdout is not None
        reader.stdout.close()
        if writer.wait() != 0 or reader.wait() != 0:
            raise SystemExit("ssh pipe failed")
        return time.perf_counter() - started, dst


METHODS = {
    "relay": ("dflash-tui relay (verified)", Bench.relay),
    "scp3": ("scp -3", Bench.scp3),
    "scp3v": ("scp -3 + sha256sum at both ends", Bench.scp3_verified),
    "pipe": ("ssh a cat | ssh b 'cat > f'", Bench.pipe),
    "pipev": ("ssh pipe + the relay's checks", Bench.pipe_verified),
    "direct": ("dflash-tui relay --direct (verified)", Bench.direct),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--netns", action="store_true", help="eval/train hosts in namespaces")
    parser.add_argument("--sizes", default="1M,256M,1G,tree", help="--netns: sizes and/or tree")
    parser.add_argument(
        "--before-src",
        default=None,
        help="--netns: also time the relay of this src/ tree (e.g. an older commit's), "
        "alternating with the rest",
    )
    parser.add_argument(
        "--workers-too",
        choices=("on", "off"),
        default=None,
        help="--netns: also time `relay --workers on|off` (large files' pieces through "
        "worker processes, or all in one process), for that lever",
    )
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument(
        "--host-python",
        default=None,
        metavar="PATH",
        help="--netns: the hosts' python3 is this one (default: what the hosts' PATH gives)",
    )
    parser.add_argument(
        "--slow-python",
        action="store_true",
        help=f"--netns: the hosts' python3 is a wrapper that sleeps {SLOW_PYTHON_S} s, then "
        "execs the real one (a pyenv shim's start-up)",
    )
    parser.add_argument(
        "--login-shell-s",
        type=float,
        default=0.0,
        help="--netns: the hosts' ~/.bashrc costs this many seconds (conda/pyenv init)",
    )
    parser.add_argument(
        "--login-shell",
        choices=("pyenv",),
        default=None,
        help="--netns: the hosts' ~/.bashrc runs a real `pyenv init -` (pyenv installed here)",
    )
    parser.add_argument(
        "--sftp-server",
        choices=["stock", "internal"],
        default="stock",
        help="--netns: the hosts' SFTP subsystem: Debian's sftp-server through the login "
        "shell, as stock hosts run it (default), or sshd's internal-sftp (no shell)",
    )
    parser.add_argument(
        "--pipe-hashed",
        action="store_true",
        help="--netns: also time the pipe with sha256 in the same pass on both hosts (the "
        "verification the relay does, no rename): the floor of a verified OpenSSH path",
    )
    parser.add_argument(
        "--console",
        action="store_true",
        help="--netns: also time a second relay from a running console (pool already open)",
    )
    parser.add_argument(
        "--rtt-ms",
        type=float,
        default=0.0,
        help="--netns: a long link: this round trip on --long-legs, by a delay line of the "
        "test bed's own in this (the jump host's) namespace (the kernel has no netem)",
    )
    parser.add_argument(
        "--rate-mbit", type=float, default=None, help="--netns: the long link's rate, each way"
    )
    parser.add_argument(
        "--long-legs",
        choices=("train", "eval", "both"),
        default="train",
        help="--netns: which leg is long (default: jump -> train, the cloud box)",
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=ARGS",
        help="--netns: also time `relay ARGS` for files (e.g. 'legs1=--long-streams 1'), "
        "alternating with the rest; repeatable",
    )
    parser.add_argument(
        "--cut-at",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help="--netns: also time a relay whose train connections are all cut once this "
        "much of the file is done (it resumes by ranges; prints what it sent again)",
    )
    parser.add_argument(
        "--skip", default="", help="--netns: methods left out, e.g. scp3,pipe (for a quick look)"
    )
    parser.add_argument(
        "--netns-prefix", default=NETNS_PREFIX, help="--netns: namespace name prefix"
    )
    parser.add_argument(
        "--rounds", type=int, default=None, help="rounds (default 5 with --netns, else 3)"
    )
    parser.add_argument("--streams", type=int, default=None, help="dflash-tui relay --streams")
    parser.add_argument("--methods", default="relay,scp3,pipe")
    parser.add_argument("--dir", default=None, help="work directory (default: a temp dir)")
    args = parser.parse_args()
    if args.netns:
        args.rounds = args.rounds or 5
        netns_main(args)
        return
    args.rounds = args.rounds or 3
    if not shutil.which("sshd") and not Path("/usr/sbin/sshd").exists():
        raise SystemExit("needs OpenSSH sshd (apt-get install openssh-server)")
    work = Path(tempfile.mkdtemp(prefix="relay-bench-", dir=args.dir))
    methods = args.methods.split(",")
    size = args.size_mib << 20
    bench = Bench(work, size, args.streams)
    times: dict[str, list[float]] = {m: [] for m in methods}
    cpus: dict[str, list[float]] = {m: [] for m in methods}
    load0 = os.getloadavg()
    try:
        for rnd in range(args.rounds):
            for name in methods:
                cpu0 = bench.cpu_s()
                elapsed, dst = getattr(bench, METHODS[name][1].__name__)()
                time.sleep(0.5)  # let sshd reap the finished sessions
                cpu = bench.cpu_s() - cpu0
                got = sha256_file(dst)
                if got != bench.sha:
                    raise SystemExit(f"{name}: WRONG COPY sha256 {got} != {bench.sha}")
                dst.unlink()
                times[name].append(elapsed)
                cpus[name].append(cpu)
                print(
                    f"round {rnd + 1} {METHODS[name][0]:36s} {elapsed:7.2f} s "
                    f"{size / MB / elapsed:7.1f} MB/s  cpu {cpu:6.2f} s  sha256 ok",
                    flush=True,
                )
    finally:
        bench.close()
        shutil.rmtree(work, ignore_errors=True)
    load1 = os.getloadavg()
    print()
    print(
        f"{size / MB:.0f} MB file, {args.rounds} round(s), {os.cpu_count()} CPUs "
        f"({platform.processor() or platform.machine()}), load average "
        f"{load0[0]:.2f} before, {load1[0]:.2f} after"
    )
    medians = {m: statistics.median(t) for m, t in times.items()}
    cpu_medians = {m: statistics.median(t) for m, t in cpus.items()}
    print(f"{'method':38s} {'median s':>9s} {'MB/s':>8s} {'best MB/s':>9s} {'CPU s':>7s}")
    for m in methods:
        print(
            f"{METHODS[m][0]:38s} {medians[m]:9.2f} {size / MB / medians[m]:8.1f} "
            f"{size / MB / min(times[m]):9.1f} {cpu_medians[m]:7.2f}"
        )
    if "relay" in medians:
        for m in methods:
            if m != "relay":
                print(
                    f"relay vs {METHODS[m][0]}: throughput {medians[m] / medians['relay']:.2f}x, "
                    f"CPU used {cpu_medians['relay'] / cpu_medians[m]:.2f}x"
                )


if __name__ == "__main__":
    main()
