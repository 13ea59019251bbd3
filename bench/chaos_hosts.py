"""The chaos soak's parts (bench/chaos.py): hosts in network namespaces with their faults,
a private tmux server, and what is known of each run's log and its follower."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from dflash_tui.demo import assets as demo_assets
from dflash_tui.demo.cluster import TRAIN_SCRIPT
from dflash_tui.monitor.lines import clean_line
from tests.testbed import ClientKey, SshdHost, hosts_toml, sshd_host_entry
from tests.transfer.netns import Namespace

PREFIX = "dft36"
"""Namespaces, tmux sockets, temp folders and mounts of this bench start with it."""
RUNS = [f"run{i}" for i in range(10)]
METRICS_PORT = 8000


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Tmux:
    """A private tmux server named with this bench's prefix (own socket, no user config)."""

    def __init__(self, name: str) -> None:
        self.socket = f"{PREFIX}-{os.getpid()}-{name}"
        self.env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TMUX")}

    def __call__(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            timeout=15,
            env=self.env,
        ).stdout

    def pane_pid(self, target: str) -> int | None:
        out = self("display-message", "-p", "-t", target, "#{pane_pid}").strip()
        return int(out) if out.isdigit() else None

    def server_pids(self) -> list[int]:
        """The tmux server's pid (a list: none once it is gone)."""
        out = self("display-message", "-p", "#{pid}").strip()
        return [int(out)] if out.isdigit() else []

    def kill(self) -> None:
        self("kill-server")


# --------------------------------------------------------------------------- topology


@dataclass
class Host:
    name: str
    ns: Namespace
    sshd: SshdHost

    @property
    def home(self) -> Path:
        assert self.sshd.home is not None
        return self.sshd.home

    def cut(self, on: bool) -> None:
        """Every packet between this machine and the host dropped silently (the host's end of
        its link down: this kernel has no netem), or the link back up."""
        state = "down" if on else "up"
        subprocess.run(
            ["ip", "netns", "exec", self.ns.name, "ip", "link", "set", f"{self.ns.name}i", state],
            check=True,
        )

    def power_off(self) -> None:
        """Every sshd process in the host's namespace killed: the listener and each session,
        also those an earlier sshd restart left running outside the listener's tree (a real
        reboot ends them all; stopping only the listener's tree let a console's connection
        opened before the restart live through the "reboot")."""
        self.sshd.stop()
        pids = subprocess.run(["ip", "netns", "pids", self.ns.name], capture_output=True, text=True)
        for pid in pids.stdout.split():
            try:
                if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sshd"):
                    os.kill(int(pid), signal.SIGKILL)
            except (OSError, ValueError):
                continue  # gone meanwhile

    def squeeze(self, on: bool) -> None:
        """A delay and loss spike: the link shaped to 256 kbit/s with a 300 ms queue (tbf drops
        what overflows it), or restored."""
        for prefix, dev in (
            ([], f"{self.ns.name}o"),
            (["ip", "netns", "exec", self.ns.name], f"{self.ns.name}i"),
        ):
            subprocess.run([*prefix, "tc", "qdisc", "del", "dev", dev, "root"], capture_output=True)
            if on:
                subprocess.run(
                    [*prefix, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", "256kbit",
                     "burst", "16kbit", "latency", "300ms"],
                    check=True,
                )  # fmt: skip


@dataclass
class Follower:
    run: str
    proc: subprocess.Popen[bytes]
    seen: list[str] = field(default_factory=list)


@dataclass
class RunState:
    name: str
    log: Path
    written: Counter[str] = field(default_factory=Counter)
    unobservable: int = 0  # lines destroyed (truncated) while the link was cut
    trainer: subprocess.Popen[bytes] | None = None

    def lines(self) -> Counter[str]:
        """The log's lines now, cleaned as the console cleans them."""
        try:
            return Counter(clean_line(r) for r in self.log.read_bytes().split(b"\n")[:-1])
        except FileNotFoundError:
            return Counter()

    def snapshot(self) -> None:
        """Add the log's lines as they are now to what was written (before they are destroyed)."""
        self.written.update(self.lines())


def soak_config(
    path: Path,
    hosts: dict[str, Host],
    key: ClientKey,
    known: Path,
    shim: Path,
    cluster: str,
    hook_port: int,
) -> Path:
    """hosts.toml of the soak: ten runs on train, a served run with vLLM's /metrics and the
    demo's baseline and suite on eval, storage, and [notify] to the loopback webhook."""
    train = sshd_host_entry(hosts["train"].sshd, key)
    train |= {"exec_prefix": [str(shim), "exec", "200", "--"], "roles": ["train"]}
    home = hosts["eval"].home  # absolute paths: an OpenSSH session starts in the user's home
    evalbox = sshd_host_entry(hosts["eval"].sshd, key)
    evalbox |= {
        "python": sys.executable,
        "device": "cpu",
        "model_roots": [str(home / "models")],
        "roles": ["eval"],
    }
    storage = sshd_host_entry(hosts["storage"].sshd, key) | {"roles": ["storage"]}
    extra = "".join(
        f'[[runs]]\nname = "{run}"\nhost = "train"\nlog = "workspace/train_{run}.log"\n'
        f'process = "{TRAIN_SCRIPT} --run {run} --cluster {cluster}"\nstall_after_s = 120\n\n'
        for run in RUNS
    )
    extra += (
        f'[[runs]]\nname = "served"\nhost = "eval"\nlog = "{home}/vllm.log"\nprocess = "{PREFIX}-vllm-serve"\n'
        f'metrics = "http://127.0.0.1:{METRICS_PORT}/metrics"\n\n'
        f'[[checkpoints]]\nname = "zlab"\nhost = "eval"\npath = "{home / demo_assets.BASELINE_DIR}"\nbaseline = true\n\n'
        f'[[suites]]\nname = "{demo_assets.SUITE_NAME}"\nhost = "eval"\ncache = "{home / demo_assets.SUITE_DIR}"\n\n'
        f'[notify]\nurls = ["json://127.0.0.1:{hook_port}/chaos"]\nmax_per_hour = 1000\n'
    )
    hosts_map = {"train": train, "eval": evalbox, "storage": storage}
    return hosts_toml(path, hosts_map, known_hosts=known, extra=extra)


def ssh_connections(namespaces: list[str]) -> int:
    """SSH connections the hosts' sshd hold open now: their per-connection session
    processes (`sshd: USER@...`) in each namespace. Counted live, because a host's
    log loses the closes of the sessions a reboot or an sshd restart killed."""
    total = 0
    for ns in namespaces:
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
        for pid in pids.stdout.split():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            total += cmdline.startswith(b"sshd: ") and b"@" in cmdline.split(b"\0")[0]
    return total


def type_relay(tmux: Tmux, src: str, dst: str) -> None:
    """Open the console's relay form (`t`) and type SRC, Tab, DST, Enter at a human pace."""
    for keys, pause in (
        (["Escape"], 0.5),
        (["t"], 1.0),
        (["-l", src], 0.5),
        (["Tab"], 0.3),
        (["-l", dst], 0.5),
        (["Enter"], 0.0),
    ):
        tmux("send-keys", "-t", "console", *keys)
        time.sleep(pause)
