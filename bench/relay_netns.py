"""bench/relay.py --netns: the eval and train hosts in network namespaces behind this
machine (the jump host), optionally a long link in front of one or both
(tests/transfer/delay_line.py), the relay against `scp -3` and the two-ssh pipe in
alternating rounds. See bench/relay.py's docstring for the options."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from tests.testbed import (  # noqa: E402
    ClientKey,
    SshdHost,
    hosts_toml,
    sha256_file,
    sshd_host_entry,
)
from tests.transfer import delay_line  # noqa: E402
from tests.transfer.netns import (  # noqa: E402
    Namespace,
    delete_namespace,
    make_namespace,
    netns_permitted,
    remove_stale_namespaces,
)

MB = 1_000_000
SLOW_PYTHON_S = 0.15


def _write_random(path: Path, size: int) -> str:
    digest = hashlib.sha256()
    with path.open("wb") as f:
        left = size
        while left:
            chunk = os.urandom(min(1 << 20, left))
            digest.update(chunk)
            f.write(chunk)
            left -= len(chunk)
    return digest.hexdigest()


NETNS_PREFIX = "dfb"
TREE = "tree"
TREE256 = "tree256"  # 200 files of 8-256 KB
TREES = (TREE, TREE256)


def _parse_size(word: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(word[:-1]) * units[word[-1].upper()] if word[-1].upper() in units else int(word)


def _size_label(size: int) -> str:
    for unit, n in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= n and size % n == 0:
            return f"{size // n} {unit}"
    return f"{size} B"


def _write_results_tree(root: Path, files: int = 200, low: int = 200, high: int = 24_000) -> int:
    """A results tree as eval runs leave it: per run a config, metrics, samples, a log
    (`low`..`high` bytes each)."""
    rng = random.Random(14)
    total = 0
    names = ["config.json", "metrics.json", "samples.jsonl", "eval.log", "acceptance.csv"]
    for i in range(files):
        run = root / f"run-{i // len(names):03d}"
        run.mkdir(parents=True, exist_ok=True)
        size = rng.randint(low, high)
        (run / names[i % len(names)]).write_bytes(rng.randbytes(size))
        total += size
    return total


def _tree_sha(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): sha256_file(p) for p in sorted(root.rglob("*")) if p.is_file()
    }


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


# Stock Debian/Ubuntu sshd_config: sshd starts it through the user's shell, so an SFTP
# session pays ~/.bashrc like a command does (the test bed's internal-sftp does not).
DEBIAN_SFTP_SERVER = "/usr/lib/openssh/sftp-server"


def _bashrc(login_shell_s: float, login_shell: str | None) -> str:
    """The hosts' ~/.bashrc: empty, a sleep of `login_shell_s`, or a real pyenv init."""
    lines = []
    if login_shell_s:
        lines.append(f"sleep {login_shell_s}")
    if login_shell == "pyenv":
        root = Path.home() / ".pyenv"
        if not (root / "bin" / "pyenv").exists():
            raise SystemExit(f"--login-shell pyenv: no pyenv in {root}")
        lines += [
            f"export PYENV_ROOT={root}",
            'export PATH="$PYENV_ROOT/bin:$PATH"',
            'eval "$(pyenv init -)"',
        ]
    return "".join(f"{line}\n" for line in lines)


@dataclass(frozen=True)
class LongLink:
    """`--rtt-ms` / `--rate-mbit`: a delay line (tests/transfer/delay_line.py) in front of
    one host's sshd or both, in this machine's (the jump host's) namespace."""

    rtt_ms: float
    rate_mbit: float | None
    legs: str  # "train", "eval" or "both"

    def describe(self) -> str:
        rate = f"{self.rate_mbit:g} Mbit/s" if self.rate_mbit else "unpaced"
        return f"{self.legs} leg(s): {self.rtt_ms:g} ms round trip, {rate} each way"

    def seconds(self, nbytes: int) -> float | None:
        """How long `nbytes` take at the link's rate (None: unpaced)."""
        return nbytes * 8 / (self.rate_mbit * 1e6) if self.rate_mbit else None


def _known_line(host: SshdHost, address: str, port: int) -> str:
    """`host`'s key as reached at address:port (its own, or a delay line's)."""
    key = host.known_hosts_line().split(maxsplit=1)[1]
    return f"{address if port == 22 else f'[{address}]:{port}'} {key}"


class NetnsBench:
    """Eval and train hosts in namespaces that reach only this machine (the jump host)."""

    def __init__(
        self,
        work: Path,
        streams: int | None,
        before_src: Path | None = None,
        host_python: str | None = None,
        slow_python: float = 0.0,
        bashrc: str = "",
        prefix: str = "dfb",
        sftp_subsystem: str = DEBIAN_SFTP_SERVER,
        long_link: LongLink | None = None,
    ) -> None:
        self.work = work
        self.streams = streams
        self.before_src = before_src
        self.workers_too: str | None = None
        self.namespaces: list[Namespace] = []
        self.hosts: list[SshdHost] = []
        remove_stale_namespaces(prefix)
        self.key = ClientKey.generate(work / "key")
        env = _host_python_env(work / "host-bin", host_python, slow_python)
        for letter in "et":
            self.namespaces.append(make_namespace(letter, prefix))
        ns_e, ns_t = self.namespaces
        # VERBOSE: sshd logs "Starting session: ..." for every command and subsystem.
        self.eval = SshdHost(
            work / "eval", self.key, netns=ns_e.name, address=ns_e.address, env=env,
            log_level="VERBOSE", sftp_subsystem=sftp_subsystem,
        )  # fmt: skip
        self.train = SshdHost(
            work / "train", self.key, netns=ns_t.name, address=ns_t.address, env=env,
            log_level="VERBOSE", sftp_subsystem=sftp_subsystem,
        )  # fmt: skip
        for host in (self.eval, self.train):
            assert host.home is not None
            (host.home / ".bashrc").write_text(bashrc)
            self.hosts.append(host.start())
        if ns_e.can_connect(self.train.address, 22) or ns_t.can_connect(self.eval.address, 22):
            raise SystemExit("the namespaces reach each other: not a jump-host topology")
        # Where this machine reaches each host: its sshd, or a delay line in front of it.
        self.reach = {id(h): (h.address, h.port) for h in (self.eval, self.train)}
        self.delay_lines: list[subprocess.Popen[str]] = []
        self.long_link = long_link
        if long_link is not None:
            for name, host, ns in (("eval", self.eval, ns_e), ("train", self.train, ns_t)):
                if long_link.legs in (name, "both"):
                    proc, port = delay_line.start(
                        (ns.gateway, 0), (host.address, host.port), long_link.rtt_ms,
                        long_link.rate_mbit,
                    )  # fmt: skip
                    self.delay_lines.append(proc)
                    self.reach[id(host)] = (ns.gateway, port)
        self.known = work / "known_hosts"
        self.known.write_text(
            "".join(_known_line(h, *self.reach[id(h)]) for h in (self.eval, self.train))
        )
        self.config = hosts_toml(
            work / "hosts.toml",
            {
                name: {**sshd_host_entry(h, self.key), "address": self.reach[id(h)][0],
                       "port": self.reach[id(h)][1]}
                for name, h in (("eval", self.eval), ("train", self.train))
            },
            known_hosts=self.known,
        )  # fmt: skip
        self.src_dir = work / "eval-data"
        self.dst_dir = work / "train-data"
        self.src_dir.mkdir()
        self.dst_dir.mkdir()
        self.run_no = 0
        self.last_finished: dict[str, object] = {}
        self.cut_at = 0.0
        self.last_cut = ""
        # As installed: byte-compiled modules (pip compiles them; a developer's shell
        # may say PYTHONDONTWRITEBYTECODE, which would time the compiler at every run).
        self.env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)
        for tree in [ROOT / "src", *([before_src] if before_src else [])]:
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree)], check=True)

    def close(self) -> None:
        for proc in self.delay_lines:
            proc.kill()
            proc.wait()
        for host in self.hosts:
            host.stop()
        for ns in self.namespaces:
            delete_namespace(ns.name)

    def sessions(self) -> tuple[int, int, int, int]:
        """Sessions sshd started so far: (eval commands, eval subsystems, train ..., ...)."""
        counts: list[int] = []
        for host in (self.eval, self.train):
            text = host.log_path.read_text(errors="replace")
            counts.append(text.count("Starting session: command"))
            counts.append(text.count("Starting session: subsystem"))
        return counts[0], counts[1], counts[2], counts[3]

    def login_shell(self) -> str:
        """How long `ssh eval true` takes (the login shell's cost, plus connecting)."""
        started = time.perf_counter()
        subprocess.run([*self._ssh(self.eval), "true"], check=True)
        shell = time.perf_counter() - started
        started = time.perf_counter()
        subprocess.run(
            [*self._ssh(self.eval, ["-s"]), "sftp"], input=b"", check=False, capture_output=True
        )
        sftp = time.perf_counter() - started
        return f"`ssh eval true` {shell:.3f} s, an SFTP session {sftp:.3f} s"

    def host_python(self) -> str:
        """Which python3 the hosts' sessions find, and how long `python3 -c pass` takes there."""
        out = subprocess.run(
            [*self._ssh(self.eval), 'command -v python3; python3 -V; '
             's=$(date +%s.%N); python3 -c pass; e=$(date +%s.%N); echo "$s $e"'],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        where, version, times = out.stdout.strip().splitlines()[-3:]
        start, end = map(float, times.split())
        return f"{where} ({version}, `python3 -c pass` {end - start:.3f} s)"

    def _ssh(self, host: SshdHost, options: list[str] | None = None) -> list[str]:
        return [
            "ssh", "-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={self.known}",
            "-i", str(self.key.private), *(options or []), "-p", str(self.reach[id(host)][1]),
            f"root@{self.reach[id(host)][0]}",
        ]  # fmt: skip

    def _scp_url(self, host: SshdHost, path: Path) -> str:
        address, port = self.reach[id(host)]
        return f"scp://root@{address}:{port}/{path}"

    def _dst(self) -> Path:
        self.run_no += 1
        return self.dst_dir / f"copy{self.run_no}"

    def relay_console(self, src: Path) -> tuple[float, Path, dict[str, float]]:
        """A second relay from a running console: connections already open, nothing to
        import; timed from the call to its result (the first relay warms the pool)."""
        import asyncio

        from dflash_tui.core.config_parse import load_config
        from dflash_tui.remote.pool import HostPool
        from dflash_tui.transfer import open_transfer_state, relay

        warm, dst = self._dst(), self._dst()

        async def twice() -> float:
            config = load_config(self.config)
            conn = open_transfer_state(config.console.state_dir)
            try:
                async with HostPool(config) as pool:
                    await relay(pool, conn, f"eval:{src}", f"train:{warm}")
                    started = time.perf_counter()
                    await relay(pool, conn, f"eval:{src}", f"train:{dst}")
                    return time.perf_counter() - started
            finally:
                conn.close()

        elapsed = asyncio.run(twice())
        shutil.rmtree(warm) if warm.is_dir() else warm.unlink()
        return elapsed, dst, {}

    def relay_inproc(self, src: Path) -> tuple[float, Path, dict[str, float]]:
        """The relay with --workers on|off (--workers-too), for that lever."""
        return self.relay(src, extra=["--workers", self.workers_too or "auto"])

    def relay_before(self, src: Path) -> tuple[float, Path, dict[str, float]]:
        """The relay from another source tree (--before-src), for before/after side by side."""
        return self.relay(src, src_tree=self.before_src)

    def relay(
        self, src: Path, src_tree: Path | None = None, extra: list[str] | None = None
    ) -> tuple[float, Path, dict[str, float]]:
        dst = self._dst()
        cmd = [
            sys.executable, "-m", "dflash_tui", "relay", "--config", str(self.config),
            "--json", f"eval:{src}", f"train:{dst}",
        ]  # fmt: skip
        if self.streams:
            cmd += ["--streams", str(self.streams)]
        cmd += extra or []
        env = {**self.env, "DFLASH_TUI_RELAY_TRACE": "1"}
        if src_tree is not None:
            env["PYTHONPATH"] = str(src_tree)
        epoch = time.time()
        started = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True, env=env)
        elapsed = time.perf_counter() - started
        if out.returncode != 0:
            raise SystemExit(f"relay failed: {out.stderr[-2000:] or out.stdout[-2000:]}")
        events = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
        self.last_finished = next((e for e in events if e.get("event") == "transfer_finished"), {})
        verified = [e for e in events if e.get("event") == "file_verified"]
        if not verified or any(e["sha256_src"] != e["sha256_dst"] for e in verified):
            raise SystemExit(f"relay: sha256 at the two ends differ or missing: {verified}")
        if src_tree is not None or extra:
            return elapsed, dst, {}
        return elapsed, dst, {k: v - epoch for k, v in _trace(out.stderr).items()}

    def relay_cut(self, src: Path) -> tuple[float, Path, dict[str, float]]:
        """The relay with the train host's sshd sessions killed once `cut_at` of the file
        is done (every connection to it, the pool's and the streams'): it resumes by
        ranges; `last_cut` says how much it sent against the file's size."""
        dst = self._dst()
        cmd = [
            sys.executable, "-m", "dflash_tui", "relay", "--config", str(self.config),
            "--json", f"eval:{src}", f"train:{dst}",
        ]  # fmt: skip
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=self.env)
        assert proc.stdout is not None
        events = []
        cut_done = 0
        for line in proc.stdout:
            if not line.startswith("{"):
                continue
            event = json.loads(line)
            events.append(event)
            if (
                not cut_done
                and event.get("event") == "file_progress"
                and event["bytes_done"] >= self.cut_at * event["bytes_total"]
            ):
                cut_done = event["bytes_done"]
                self.train.kill_sessions()
        if proc.wait() != 0:
            raise SystemExit("relay with a cut failed")
        elapsed = time.perf_counter() - started
        finished = next(e for e in events if e.get("event") == "transfer_finished")
        retries = sum(e.get("event") == "retrying" for e in events)
        self.last_cut = (
            f"cut at {cut_done / MB:.0f} MB, {retries} retry, sent "
            f"{finished['bytes_sent'] / finished['bytes_total']:.3f}x the file"
        )
        self.last_finished = finished
        return elapsed, dst, {}

    def scp3(self, src: Path) -> tuple[float, Path, dict[str, float]]:
        dst = self._dst()
        cmd = [
            "scp", "-3", "-q", "-r", "-o", "BatchMode=yes",
            "-o", f"UserKnownHostsFile={self.known}", "-i", str(self.key.private),
            self._scp_url(self.eval, src), self._scp_url(self.train, dst),
        ]  # fmt: skip
        started = time.perf_counter()
        subprocess.run(cmd, check=True)
        return time.perf_counter() - started, dst, {}

    def pipe(self, src: Path) -> tuple[float, Path, dict[str, float]]:
        dst = self._dst()
        started = time.perf_counter()
        reader = subprocess.Popen([*self._ssh(self.eval), f"cat '{src}'"], stdout=subprocess.PIPE)
        writer = subprocess.Popen([*self._ssh(self.train), f"cat > '{dst}'"], stdin=reader.stdout)
        assert reader.stdout is not None
        reader.stdout.close()
        if writer.wait() != 0 or reader.wait() != 0:
            raise SystemExit("ssh pipe failed")
        return time.perf_counter() - started, dst, {}

    def pipe_hashed(self, src: Path) -> tuple[float, Path, dict[str, float]]:
        """The pipe with the relay's verification in the same pass (`tee` into sha256 on both
        hosts, compared here), without the rename: the floor of a verified OpenSSH data path."""
        dst = self._dst()
        hash_cmd = "openssl dgst -sha256 -r"
        started = time.perf_counter()
        # the relay's legs' ciphers (AES-GCM first), not OpenSSH's default chacha20
        aes = ["-o", "Ciphers=aes128-gcm@openssh.com,aes256-gcm@openssh.com"]
        reader = subprocess.Popen(
            [*self._ssh(self.eval, aes), f"{{ tee /dev/fd/3 < '{src}' | {hash_cmd} >&2; }} 3>&1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        writer = subprocess.Popen(
            [*self._ssh(self.train, aes), f"tee '{dst}' | {hash_cmd}"],
            stdin=reader.stdout,
            stdout=subprocess.PIPE,
        )
        assert reader.stdout is not None and reader.stderr is not None
        reader.stdout.close()
        dst_sha = writer.communicate()[0].split()[0]
        src_sha = reader.stderr.read().split()[0]
        if reader.wait() != 0 or writer.returncode != 0 or src_sha != dst_sha:
            raise SystemExit("hashed ssh pipe failed or its two sha256 differ")
        return time.perf_counter() - started, dst, {}


# What OpenSSH's sshd gives a session as PATH (Debian's build) when nothing else is set.
SSHD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _host_python_env(bin_dir: Path, host_python: str | None, slow_s: float) -> dict[str, str]:
    """The hosts' session environment for `--host-python` / `--slow-python`.

    Neither: nothing (the hosts' PATH decides, as for a stranger). Otherwise a
    directory put first on the hosts' PATH holds `python3`: a link to
    `host_python`, or (`slow_s`) a wrapper that sleeps, then execs the real
    one, like a pyenv shim or a module-loading wrapper on a GPU box.
    """
    if host_python is None and not slow_s:
        return {}
    real = host_python or shutil.which("python3", path=SSHD_PATH)
    if real is None:
        raise SystemExit("no python3 on the hosts' PATH to wrap")
    bin_dir.mkdir(parents=True, exist_ok=True)
    wrapper = bin_dir / "python3"
    if slow_s:
        wrapper.write_text(f'#!/bin/sh\nsleep {slow_s}\nexec {real} "$@"\n')
        wrapper.chmod(0o755)
    else:
        wrapper.symlink_to(real)
    return {"PATH": f"{bin_dir}:{SSHD_PATH}"}


def _trace(stderr: str) -> dict[str, float]:
    """Phase timestamps the relay prints with DFLASH_TUI_RELAY_TRACE=1 (`trace PHASE SECONDS`):
    a phase marked more than once (one per stream) gives its first time, and its last
    as PHASE_last."""
    phases: dict[str, float] = {}
    for line in stderr.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "trace":
            if parts[1] in phases:
                phases[parts[1] + "_last"] = float(parts[2])
            else:
                phases[parts[1]] = float(parts[2])
    return phases


NETNS_METHODS = {
    "relay": "dflash-tui relay (sha256 both ends)",
    "relay_inproc": "relay --workers (--workers-too)",
    "relay_before": "relay, --before-src tree",
    "relay_console": "a second relay in a running console",
    "scp3": "scp -3",
    "pipe": "ssh eval cat | ssh train 'cat >'",
    "pipe_hashed": "the pipe, tee into sha256 on both hosts",
    "relay_cut": "relay, train's sessions killed mid-file",
}


def _variant(word: str) -> tuple[str, list[str]]:
    name, _, extra = word.partition("=")
    return name, extra.split()


def _method_label(name: str) -> str:
    return f"relay {name[8:]}" if name.startswith("variant:") else NETNS_METHODS[name]


def _legs_line(finished: dict[str, object]) -> str:
    """The streams a relay chose and its per-leg rates (from its transfer_finished)."""
    legs = finished.get("legs")
    if not isinstance(legs, dict):
        return "no per-leg figures"
    rtt = legs.get("rtt_ms") or []
    rates = legs.get("rates") or {}
    assert isinstance(rtt, list) and isinstance(rates, dict)
    shown = ", ".join(f"{leg} {float(r) / MB:.0f} MB/s" for leg, r in rates.items())
    rtts = f" (round trips {'/'.join(f'{float(x):.0f}' for x in rtt)} ms)" if rtt else ""
    return f"{legs.get('path')} x{legs.get('streams')}{rtts}: {shown}"


def _legs_said(bench: NetnsBench, name: str) -> str:
    if name == "relay_cut":
        return "  " + bench.last_cut + "; " + _legs_line(bench.last_finished)
    if name == "relay" or name.startswith("variant:"):
        return "  " + _legs_line(bench.last_finished)
    return ""


def netns_main(args: argparse.Namespace) -> None:
    reason = netns_permitted()
    if reason:
        raise SystemExit(f"--netns: {reason}")

    def stop(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    work = Path(tempfile.mkdtemp(prefix="relay-netns-", dir=args.dir))
    items = [w.strip() for w in args.sizes.split(",") if w.strip()]
    bench: NetnsBench | None = None
    times: dict[tuple[str, str], list[float]] = {}
    traces: dict[str, list[dict[str, float]]] = {}
    sessions: dict[str, tuple[int, int, int, int]] = {}
    finished: dict[tuple[str, str], list[dict[str, object]]] = {}
    variants = dict(_variant(v) for v in args.variant)
    skipped = set(args.skip.split(",")) if args.skip else set()
    uptime0 = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"uptime before: {uptime0}", flush=True)
    python_line = ""
    try:
        before = Path(args.before_src).resolve() if args.before_src else None
        slow = SLOW_PYTHON_S if args.slow_python else 0.0
        bashrc = _bashrc(args.login_shell_s, args.login_shell)
        subsystem = DEBIAN_SFTP_SERVER if args.sftp_server == "stock" else "internal-sftp"
        long_link = (
            LongLink(args.rtt_ms, args.rate_mbit, args.long_legs)
            if args.rtt_ms or args.rate_mbit
            else None
        )
        bench = NetnsBench(
            work, args.streams, before, args.host_python, slow, bashrc, args.netns_prefix,
            subsystem, long_link,
        )  # fmt: skip
        if long_link is not None:
            print(f"long link: {long_link.describe()}", flush=True)
        bench.workers_too = args.workers_too
        bench.cut_at = args.cut_at
        python_line = bench.host_python() + "; " + bench.login_shell()
        print(f"hosts' python3: {python_line}", flush=True)
        sources: dict[str, tuple[Path, object]] = {}
        for item in items:
            if item in TREES:
                root = bench.src_dir / item
                sizes = (200, 24_000) if item == TREE else (8 << 10, 256 << 10)
                total = _write_results_tree(root, 200, *sizes)
                sources[item] = (root, _tree_sha(root))
                print(f"{item}: 200 files, {total / MB:.1f} MB", flush=True)
            else:
                size = _parse_size(item)
                path = bench.src_dir / f"model-{item}.safetensors"
                sources[item] = (path, _write_random(path, size))
        for rnd in range(args.rounds):
            for item in items:
                src, want = sources[item]
                methods = ["relay", "scp3"] + ([] if item in TREES else ["pipe"])
                methods = [m for m in methods if m not in skipped]
                methods += [f"variant:{v}" for v in variants if item not in TREES]
                methods += ["relay_cut"] if args.cut_at and item not in TREES else []
                methods += ["relay_before"] if args.before_src else []
                methods += ["relay_inproc"] if args.workers_too and item not in TREES else []
                methods += ["relay_console"] if args.console and item not in TREES else []
                methods += ["pipe_hashed"] if args.pipe_hashed and item not in TREES else []
                shift = rnd % len(methods)  # alternate who goes first
                for name in methods[shift:] + methods[:shift]:
                    before_sessions = bench.sessions()
                    if name.startswith("variant:"):
                        elapsed, dst, phases = bench.relay(src, extra=variants[name[8:]])
                    else:
                        elapsed, dst, phases = getattr(bench, name)(src)
                    if name in ("relay", "relay_cut") or name.startswith("variant:"):
                        finished.setdefault((item, name), []).append(bench.last_finished)
                    if name == "relay":
                        time.sleep(0.2)  # sshd logs a session as it starts; let it write
                        counted = [
                            b - a for a, b in zip(before_sessions, bench.sessions(), strict=True)
                        ]
                        sessions[item] = (counted[0], counted[1], counted[2], counted[3])
                    got = _tree_sha(dst) if item in TREES else sha256_file(dst)
                    if got != want:
                        raise SystemExit(f"{name} {item}: WRONG COPY")
                    shutil.rmtree(dst) if dst.is_dir() else dst.unlink()
                    times.setdefault((item, name), []).append(elapsed)
                    if phases:
                        traces.setdefault(item, []).append(phases)
                    print(
                        f"round {rnd + 1} {item:>5s} {_method_label(name):36s} "
                        f"{elapsed:7.3f} s  load {_load()}{_legs_said(bench, name)}",
                        flush=True,
                    )
    finally:
        if bench is not None:
            bench.close()
        shutil.rmtree(work, ignore_errors=True)
    uptime1 = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print()
    print(f"uptime before: {uptime0}")
    print(f"uptime after:  {uptime1}")
    print(f"hosts' python3: {python_line}")
    print(f"{args.rounds} round(s), {os.cpu_count()} CPUs, medians")
    link = bench.long_link if bench is not None else None
    if link is not None:
        print(f"long link: {link.describe()}; 'link s': the file at the link's rate")
    print(
        "| item | relay s | scp -3 s | pipe s | relay / scp -3 | relay / pipe | before s "
        f"| --workers {args.workers_too} s | link s (relay's share) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for item in items:
        med = {m: statistics.median(times[(item, m)]) for m in NETNS_METHODS if (item, m) in times}
        for (it, name), got in times.items():
            if it == item and name.startswith("variant:"):
                print(f"{item} {_method_label(name)}: {statistics.median(got):.3f} s")
        if "relay" not in med or "scp3" not in med:
            continue
        label = {TREE: "200-file tree", TREE256: "200 files of 8-256 KB"}.get(item) or (
            _size_label(_parse_size(item))
        )
        pipe = f"{med['pipe']:.3f}" if "pipe" in med else ""
        vs_pipe = f"{med['pipe'] / med['relay']:.2f}x" if "pipe" in med else ""
        before = (
            f"{med['relay_before']:.3f} ({med['scp3'] / med['relay_before']:.2f}x)"
            if "relay_before" in med
            else ""
        )
        inproc = f"{med['relay_inproc']:.3f}" if "relay_inproc" in med else ""
        if "relay_console" in med:
            console = med["relay_console"]
            inproc += f" console {console:.3f} ({med['scp3'] / console:.2f}x scp -3)"
        if "pipe_hashed" in med:
            hashed = med["pipe_hashed"]
            inproc += f" hashed pipe {hashed:.3f} (relay {hashed / med['relay']:.2f}x of it)"
        at_link = (
            link.seconds(_parse_size(item)) if link is not None and item not in TREES else None
        )
        share = f"{at_link:.3f} ({at_link / med['relay']:.0%})" if at_link else ""
        print(
            f"| {label} | {med['relay']:.3f} | {med['scp3']:.3f} | {pipe} | "
            f"{med['scp3'] / med['relay']:.2f}x | {vs_pipe} | {before} | {inproc} | {share} |"
        )
    for (item, name), rows in finished.items():
        mid = sorted(rows, key=lambda r: float(str(r.get("elapsed_s", 0))))[len(rows) // 2]
        print(f"{item} {_method_label(name)}: {_legs_line(mid)}")
    for item, rows in traces.items():
        keys = list(rows[0])
        shown = ", ".join(f"{k} {statistics.median(r.get(k, 0.0) for r in rows):.3f}" for k in keys)
        print(f"relay phases {item} (median s since start): {shown}")
    for item, (ec, es, tc, ts) in sessions.items():
        print(
            f"sessions per relay {item}: eval {ec} command(s) + {es} subsystem(s), "
            f"train {tc} command(s) + {ts} subsystem(s)"
        )
