"""A real single-node Slurm cluster on localhost for tests: munged, slurmctld, slurmd,
and optionally MariaDB + slurmdbd so that `sacct` works.

Everything lives under one temporary folder: its own munge key and socket, its
own slurm.conf (ports, state and spool dirs, PID and log files), its own MariaDB
datadir and socket. Nothing touches /etc or the system's daemons, so two
clusters (with and without accounting) can run side by side and a crashed test
run leaves nothing behind but files.

The node is cgroup-free (proctrack/linuxproc, task/none) and declares two fake
GPUs (`Gres=gpu:2` backed by /dev/null and /dev/zero, which slurmd accepts as
character devices), two CPUs and a partition with a MaxTime, so tests can make
a job pend on Resources by holding both GPUs with another job.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.testbed import free_port

SLURM_BINARIES = ("slurmctld", "slurmd", "sbatch", "squeue", "sacct", "scontrol", "scancel")
MUNGE_BINARIES = ("munged", "mungekey")
ACCOUNTING_BINARIES = ("slurmdbd", "mariadbd", "mariadb-install-db", "mariadb")
INSTALL_HINT = (
    "`make test` installs slurmctld slurmd slurm-client munge slurmdbd mariadb-server on Debian"
)
PARTITION = "gpu"
NODE = "dnode"
MIN_JOB_AGE_S = 900  # finished jobs stay visible to `scontrol show job` this long


def _which(name: str) -> str | None:
    return shutil.which(name) or next(
        (p for d in ("/usr/sbin", "/usr/bin") if os.access(p := f"{d}/{name}", os.X_OK)), None
    )


def missing(binaries: Sequence[str]) -> list[str]:
    """The binaries of `binaries` that are not installed."""
    return [b for b in binaries if _which(b) is None]


class SlurmUnavailable(RuntimeError):
    """The test bed cannot run here (packages missing or not root); tests skip with this."""


class SlurmStartFailed(RuntimeError):
    """A daemon did not come up although it should have; carries its log tail."""


def _tail(path: Path, n: int = 3000) -> str:
    with contextlib.suppress(OSError):
        return path.read_text(errors="replace")[-n:]
    return "(no log)"


@dataclass
class Daemon:
    """One foreground daemon process in its own process group."""

    name: str
    argv: list[str]
    log: Path
    env: Mapping[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> Daemon:
        out = self.log.open("ab")
        self.process = subprocess.Popen(
            self.argv,
            stdout=out,
            stderr=out,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **self.env},
            start_new_session=True,
        )
        out.close()
        return self

    def check_alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise SlurmStartFailed(
                f"{self.name} exited with {self.process.returncode}:\n{_tail(self.log)}"
            )

    def stop(self, timeout_s: float = 5.0) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.process = None


class Munge:
    """munged with its own key and socket (shared by every cluster of a session)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.socket = root / "munge.sock"
        self.daemon: Daemon | None = None

    def start(self) -> Munge:
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o711)  # munged wants the socket's folder searchable, not writable
        key = self.root / "munge.key"
        if not key.exists():
            subprocess.run(
                ["mungekey", "--create", f"--keyfile={key}"], check=True, capture_output=True
            )
        key.chmod(0o400)
        self.daemon = Daemon(
            "munged",
            [
                _which("munged") or "munged",
                "--foreground",
                "--force",
                f"--key-file={key}",
                f"--socket={self.socket}",
                f"--pid-file={self.root / 'munged.pid'}",
                f"--log-file={self.root / 'munged.log'}",
                f"--seed-file={self.root / 'munged.seed'}",
                "--num-threads=4",
            ],
            self.root / "munged.out",
        ).start()
        _poll(lambda: self.socket.exists(), 10.0, self.daemon, "munged socket")
        return self

    def stop(self) -> None:
        if self.daemon:
            self.daemon.stop()


class Accounting:
    """MariaDB (own datadir, socket, loopback port) and slurmdbd in front of it.

    The database runs with --skip-grant-tables: it listens on 127.0.0.1 only,
    for one test session, and slurmdbd is its only client.
    """

    def __init__(self, root: Path, munge: Munge, hostname: str) -> None:
        self.root = root
        self.munge = munge
        self.hostname = hostname
        self.db_port = free_port()
        self.dbd_port = free_port()
        self.mariadb: Daemon | None = None
        self.slurmdbd: Daemon | None = None

    def start_database(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        data = self.root / "mysql"
        tuning = ["--innodb-log-file-size=4M", "--innodb-buffer-pool-size=16M"]
        if not data.exists():
            result = subprocess.run(
                [
                    _which("mariadb-install-db") or "mariadb-install-db",
                    "--no-defaults",
                    f"--datadir={data}",
                    "--user=root",
                    "--auth-root-authentication-method=normal",
                    "--skip-test-db",
                    *tuning,
                ],
                capture_output=True,
                text=True,
            )
            if result.returncode != 0:
                raise SlurmStartFailed(f"mariadb-install-db failed:\n{result.stderr[-3000:]}")
        self.mariadb = Daemon(
            "mariadbd",
            [
                _which("mariadbd") or "mariadbd",
                "--no-defaults",
                f"--datadir={data}",
                f"--socket={self.root / 'mysql.sock'}",
                f"--port={self.db_port}",
                "--bind-address=127.0.0.1",
                "--user=root",
                f"--pid-file={self.root / 'mysql.pid'}",
                f"--log-error={self.root / 'mysql.err'}",
                "--skip-grant-tables",
                "--skip-log-bin",
                "--innodb-flush-log-at-trx-commit=0",
                *tuning,
            ],
            self.root / "mysql.out",
        ).start()

    def wait_database(self) -> None:
        assert self.mariadb is not None
        deadline = time.monotonic() + 20.0
        while True:
            self.mariadb.check_alive()
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.db_port), 0.2),
            ):
                return
            if time.monotonic() > deadline:
                raise SlurmStartFailed(f"MariaDB did not listen:\n{_tail(self.root / 'mysql.err')}")
            time.sleep(0.05)

    def write_config(self, conf_dir: Path) -> None:
        """slurmdbd reads slurmdbd.conf from slurm.conf's folder; it must be mode 600."""
        path = conf_dir / "slurmdbd.conf"
        path.write_text(
            "\n".join(
                [
                    "AuthType=auth/munge",
                    f"AuthInfo=socket={self.munge.socket}",
                    f"DbdHost={self.hostname}",
                    "DbdAddr=127.0.0.1",
                    f"DbdPort={self.dbd_port}",
                    "SlurmUser=root",
                    f"PidFile={self.root / 'slurmdbd.pid'}",
                    f"LogFile={self.root / 'slurmdbd.log'}",
                    "StorageType=accounting_storage/mysql",
                    "StorageHost=127.0.0.1",
                    f"StoragePort={self.db_port}",
                    "StorageUser=root",
                    "StorageLoc=slurm_acct_db",
                    "",
                ]
            )
        )
        path.chmod(0o600)

    def start_dbd(self, env: Mapping[str, str]) -> None:
        self.slurmdbd = Daemon(
            "slurmdbd", [_which("slurmdbd") or "slurmdbd", "-D"], self.root / "slurmdbd.out", env
        ).start()
        deadline = time.monotonic() + 20.0
        while True:
            self.slurmdbd.check_alive()
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.dbd_port), 0.2),
            ):
                return
            if time.monotonic() > deadline:
                raise SlurmStartFailed(f"slurmdbd did not listen:\n{_tail(self.slurmdbd.log)}")
            time.sleep(0.05)

    def stop(self) -> None:
        for daemon in (self.slurmdbd, self.mariadb):
            if daemon:
                daemon.stop()


class SlurmCluster:
    """One controller and one node (`dnode`, partition `gpu`) under `root`."""

    def __init__(
        self,
        root: Path,
        munge: Munge,
        *,
        accounting: bool = False,
        cluster_name: str = "dflash",
    ) -> None:
        self.root = root
        self.munge = munge
        self.cluster_name = cluster_name
        self.hostname = socket.gethostname().split(".")[0]
        self.ctld_port = free_port()
        self.slurmd_port = free_port()
        self.conf = root / "etc" / "slurm.conf"
        self.accounting = Accounting(root / "db", munge, self.hostname) if accounting else None
        self.ctld: Daemon | None = None
        self.slurmd: Daemon | None = None
        self.partition = PARTITION
        self.node = NODE

    @property
    def env(self) -> dict[str, str]:
        """What a remote command needs to reach this cluster (`[hosts.X] env`)."""
        return {"SLURM_CONF": str(self.conf)}

    # ------------------------------------------------------------------ config

    def _slurm_conf(self) -> str:
        r = self.root
        lines = [
            f"ClusterName={self.cluster_name}",
            f"SlurmctldHost={self.hostname}(127.0.0.1)",
            f"SlurmctldPort={self.ctld_port}",
            f"SlurmdPort={self.slurmd_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge.socket}",
            f"StateSaveLocation={r / 'state'}",
            f"SlurmdSpoolDir={r / 'spool'}",
            f"SlurmctldPidFile={r / 'slurmctld.pid'}",
            f"SlurmdPidFile={r / 'slurmd.pid'}",
            f"SlurmctldLogFile={r / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={r / 'log' / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "JobCompType=jobcomp/none",
            "MpiDefault=none",
            "SwitchType=switch/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "SchedulerType=sched/backfill",
            "ReturnToService=2",
            f"MinJobAge={MIN_JOB_AGE_S}",
            "KillWait=2",
            "SlurmdParameters=config_overrides",
            "DebugFlags=NO_CONF_HASH",
            "MailProg=/bin/true",
            "GresTypes=gpu",
            "SlurmctldTimeout=30",
            "SlurmdTimeout=30",
            "MessageTimeout=5",
            # Start jobs behind a pending one within a second, not after 30 s.
            "SchedulerParameters=bf_interval=1",
        ]
        if self.accounting:
            lines += [
                "AccountingStorageType=accounting_storage/slurmdbd",
                "AccountingStorageHost=127.0.0.1",
                f"AccountingStoragePort={self.accounting.dbd_port}",
                # The munge socket for talking to slurmdbd (AuthInfo covers the rest).
                f"AccountingStoragePass={self.munge.socket}",
            ]
        else:
            lines.append("AccountingStorageType=accounting_storage/none")
        lines += [
            f"NodeName={NODE} NodeHostname={self.hostname} NodeAddr=127.0.0.1 "
            "CPUs=2 RealMemory=1000 Gres=gpu:2 State=UNKNOWN",
            f"PartitionName={PARTITION} Nodes={NODE} Default=YES MaxTime=01:00:00 State=UP",
            "",
        ]
        return "\n".join(lines)

    def write_config(self) -> None:
        for sub in ("etc", "state", "spool", "log"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.conf.write_text(self._slurm_conf())
        # gres/gpu needs a character device per GPU; /dev/null and /dev/zero stand in.
        (self.conf.parent / "gres.conf").write_text(
            f"AutoDetect=off\nNodeName={NODE} Name=gpu File=/dev/null,/dev/zero\n"
        )
        if self.accounting:
            self.accounting.write_config(self.conf.parent)

    # ------------------------------------------------------------------ life cycle

    def start_database(self) -> None:
        """Begin the slow part (MariaDB) so another cluster can start meanwhile."""
        self.write_config()
        if self.accounting:
            self.accounting.start_database()

    def start(self) -> SlurmCluster:
        if self.accounting is None or self.accounting.mariadb is None:
            self.start_database()
        if self.accounting:
            self.accounting.wait_database()
            self.accounting.start_dbd(self.env)
        log = self.root / "log"
        self.ctld = Daemon(
            "slurmctld",
            [_which("slurmctld") or "slurmctld", "-D", "-c", "-f", str(self.conf)],
            log / "slurmctld.out",
            self.env,
        ).start()
        self._wait_port(self.ctld, self.ctld_port, log / "slurmctld.log")
        self.slurmd = Daemon(
            "slurmd",
            [_which("slurmd") or "slurmd", "-D", "-N", NODE, "-f", str(self.conf)],
            log / "slurmd.out",
            self.env,
        ).start()
        return self

    def _wait_port(self, daemon: Daemon, port: int, log: Path, timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            daemon.check_alive()
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                return
            if time.monotonic() > deadline:
                raise SlurmStartFailed(f"{daemon.name} did not listen on {port}:\n{_tail(log)}")
            time.sleep(0.05)

    def wait_ready(self, timeout_s: float = 30.0) -> SlurmCluster:
        """Until the node is idle (registered, GPUs counted) and, with accounting,
        the controller has registered with slurmdbd."""
        assert self.ctld is not None and self.slurmd is not None
        deadline = time.monotonic() + timeout_s
        while True:
            self.ctld.check_alive()
            self.slurmd.check_alive()
            state = self.cli(["sinfo", "-h", "-N", "-o", "%T|%G"], check=False).stdout.strip()
            if state.startswith("idle") and "gpu:2" in state:
                break
            if time.monotonic() > deadline:
                raise SlurmStartFailed(
                    f"node not idle after {timeout_s}s (sinfo: {state!r}):\n"
                    f"{_tail(self.root / 'log' / 'slurmctld.log')}\n"
                    f"{_tail(self.root / 'log' / 'slurmd.log')}"
                )
            time.sleep(0.1)
        if self.accounting:
            while True:
                out = self.cli(
                    ["sacctmgr", "-n", "-P", "show", "cluster", "format=cluster"], check=False
                )
                if self.cluster_name in out.stdout.split():
                    break
                if time.monotonic() > deadline:
                    raise SlurmStartFailed(f"cluster not registered in slurmdbd: {out.stderr}")
                time.sleep(0.1)
        return self

    def cli(
        self, argv: Sequence[str], *, check: bool = True, timeout_s: float = 20.0
    ) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client command locally against this cluster."""
        result = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            env={**os.environ, **self.env},
            timeout=timeout_s,
        )
        if check and result.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr}")
        return result

    def cancel_all(self) -> None:
        """Cancel every job of this cluster and wait until the queue is empty."""
        with contextlib.suppress(Exception):
            self.cli(["scancel", "--user=root"], check=False)
            deadline = time.monotonic() + 10.0
            while time.monotonic() < deadline:
                if not self.cli(["squeue", "-h", "-o", "%i"], check=False).stdout.strip():
                    break
                time.sleep(0.1)

    def stop(self) -> None:
        if self.ctld is not None and self.ctld.process is not None:
            self.cancel_all()
        for daemon in (self.slurmd, self.ctld):
            if daemon:
                daemon.stop()
        if self.accounting:
            self.accounting.stop()


def _poll(ready, timeout_s: float, daemon: Daemon, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not ready():
        daemon.check_alive()
        if time.monotonic() > deadline:
            raise SlurmStartFailed(f"{what} not ready after {timeout_s}s:\n{_tail(daemon.log)}")
        time.sleep(0.05)


def unavailable_reason(accounting: bool) -> str | None:
    """Why the test bed cannot run here, or None when it can."""
    if os.geteuid() != 0:
        return "the Slurm test bed runs slurmd/slurmctld as root; these tests need root"
    needed = [*SLURM_BINARIES, *MUNGE_BINARIES, *(ACCOUNTING_BINARIES if accounting else ())]
    absent = missing(needed)
    if absent:
        return f"Slurm test bed needs {', '.join(absent)} ({INSTALL_HINT})"
    return None


__all__ = [
    "NODE",
    "PARTITION",
    "Munge",
    "SlurmCluster",
    "SlurmStartFailed",
    "SlurmUnavailable",
    "unavailable_reason",
]
