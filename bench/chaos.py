"""A seeded, bounded soak: the console on the jump-host topology while faults come.

Three OpenSSH hosts in network namespaces only this machine reaches (the jump host):
`train` (commands inside "container 200" through a `pct exec` shim, the demo's
trainers writing ten logs, a tensorboardX writer: bench/chaos_tracker.py), `eval` (the demo's baseline and suite, a /metrics endpoint
with vLLM's counter names) and `storage` (a small tmpfs as the relay destination).
`dflash-tui` runs in tmux at 160x48 with monkey keys at a human rate, `dflash-tui
watch` sends to a loopback webhook through apprise, `dflash-tui logs RUN -f` follows
every run, and ten `ssh train tail -F` run in another tmux as the comparison. For
`--minutes` faults drawn from `--seed` come one at a time with quiet stretches between
(no fault, key, relay or job: the CPU at rest is measured there): a link cut (the
host's end of its link down, 20-60 s; this kernel has no netem), a delay/loss spike
(tbf at 256 kbit/s, a 300 ms queue), sshd restarted, a host rebooted (sshd and every
session killed, then started), a log rotated (copytruncate) or truncated, a trainer
crashed and restarted, the relay destination's disk filled, the console killed
during an eval job and restarted. Meanwhile 256 MiB relays (CLI and the console's
relay form; one left interrupted is resumed) and eval jobs run. All traffic stays on
this machine's namespaces and loopback; it stops by itself and removes what it made.

    .venv/bin/python bench/chaos.py --minutes 60 --seed 36 --json > chaos.json   # as root

The report leaves nothing to judgement: lines written vs seen per run (lost,
repeated), each relay verified or failed with its reason, each eval on the board once
or failed with its reason, the webhook's alerts per condition, the console alive, its
error log, RSS, fds and SSH connections, and CPU over the quiet stretches against the
ssh tails (goal <= 2.0x). `--json` prints one object (totals + detail).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from chaos_hosts import (  # noqa: E402
    METRICS_PORT,
    PREFIX,
    RUNS,
    Follower,
    Host,
    RunState,
    Tmux,
    log,
    soak_config,
    ssh_connections,
    type_relay,
)
from chaos_report import (  # noqa: E402
    alert_counts,
    cpu_at_rest,
    error_entries,
    eval_outcomes,
    failed,
    line_counts,
    print_report,
    totals,
)
from chaos_tracker import TensorBoardWriter  # noqa: E402
from chaos_tracker import config_entry as tb_config_entry  # noqa: E402
from ui_idle import cmdline, cpu_s, descendants, rss_mib  # noqa: E402

from dflash_tui.demo import assets as demo_assets  # noqa: E402
from dflash_tui.demo import trainer as demo_trainer  # noqa: E402
from dflash_tui.demo.cluster import PCT_SHIM, TRAIN_SCRIPT  # noqa: E402
from dflash_tui.ui.guard import ERROR_LOG_NAME  # noqa: E402
from tests.notify.hookserver import HookServer  # noqa: E402
from tests.testbed import ClientKey, SshdHost  # noqa: E402
from tests.transfer.netns import (  # noqa: E402
    delete_namespace,
    make_namespace,
    netns_permitted,
    remove_stale_namespaces,
)

RELAY_MIB = 256
TMPFS_MIB = 300
MONKEY_KEYS = ["j", "k", "down", "up", "tab", "btab", "l", "l", "f", "w", "a", "o", "y", "m", "p"]
FAULTS = (
    "cut",
    "spike",
    "sshd_restart",
    "reboot",
    "rotate",
    "truncate",
    "crash",
    "disk_full",
    "console_kill",
)


class Chaos:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.work = Path(tempfile.mkdtemp(prefix=f"{PREFIX}-chaos-"))
        self.cluster = f"{PREFIX}chaos{os.getpid()}"
        self.hosts: dict[str, Host] = {}
        self.runs: dict[str, RunState] = {}
        self.followers: dict[str, Follower] = {}
        self.final_seen: dict[str, list[str]] = {}
        self.faults: list[dict[str, Any]] = []
        self.relays: list[dict[str, Any]] = []
        self.resumed: set[object] = set()  # transfer ids resume_interrupted has tried
        self.evals: list[dict[str, Any]] = []
        self.quiet: list[dict[str, float]] = []
        self.rss: dict[str, float] = {}
        self.procs: list[subprocess.Popen[bytes]] = []
        self.stop = threading.Event()
        self.resting = threading.Event()  # a quiet stretch is measured: no keys, no new work
        self.in_flight = 0  # relays and eval jobs under way
        self.flight = threading.Condition()
        self.typing = threading.Lock()  # the relay form is being typed into: no monkey keys
        self.tmux = Tmux("console")
        self.tails = Tmux("tails")
        self.hook = HookServer().start()
        self.console_pid: int | None = None
        self.console_starts = 0
        self.mounted: Path | None = None
        self.env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}

    # ------------------------------------------------------------------ setup

    def setup(self) -> None:
        problem = netns_permitted()
        if problem:
            raise SystemExit(f"needs network namespaces: {problem}")
        remove_stale_namespaces(PREFIX)
        self.key = ClientKey.generate(self.work / "key")
        for letter, name in (("t", "train"), ("e", "eval"), ("s", "storage")):
            ns = make_namespace(letter, PREFIX)
            sshd = SshdHost(
                self.work / name, self.key, netns=ns.name, address=ns.address, log_level="VERBOSE"
            )
            if name == "storage":
                # mounted before its sshd starts: `ip netns exec` gives sshd a copy of the
                # mount table, and a mount made later need not reach it (a private /)
                small = sshd.home / "small" if sshd.home else self.work / "small"
                small.mkdir(parents=True)
                subprocess.run(
                    [
                        "mount",
                        "-t",
                        "tmpfs",
                        "-o",
                        f"size={TMPFS_MIB}m",
                        f"{PREFIX}chaos",
                        str(small),
                    ],
                    check=True,
                )
                self.mounted = small
            self.hosts[name] = Host(name, ns, sshd.start())
        self.known = self.work / "known_hosts"
        self.known.write_text("".join(h.sshd.known_hosts_line() for h in self.hosts.values()))
        shim = self.work / "bin" / "pct"
        shim.parent.mkdir()
        shim.write_text(PCT_SHIM)
        shim.chmod(0o755)
        self.container = self.hosts["train"].home / "ct200"
        workspace = self.container / "workspace"
        workspace.mkdir(parents=True)
        shutil.copy(demo_trainer.__file__, workspace / TRAIN_SCRIPT)
        with (self.container / "big.bin").open("wb") as f:
            rng = random.Random(self.args.seed)
            for _ in range(RELAY_MIB):
                f.write(rng.randbytes(1 << 20))
        with (self.container / "big.bin").open("rb") as f:
            self.big_sha = hashlib.file_digest(f, "sha256").hexdigest()
        log("building the eval assets (baseline drafter and suite)")
        self.assets = demo_assets.write_demo_assets(self.hosts["eval"].home, self.container)
        self.write_config(shim)
        for run in RUNS:
            state = RunState(run, workspace / f"train_{run}.log")
            self.runs[run] = state
            self.start_trainer(state, backfill=100)
        self.start_vllm()
        self.tb = TensorBoardWriter(workspace / "tb" / "runs")
        self.tb.start()
        deadline = time.monotonic() + 60
        while not all(s.log.exists() for s in self.runs.values()):
            if time.monotonic() > deadline:
                raise SystemExit("the trainers wrote no logs within 60 s")
            time.sleep(0.2)

    def write_config(self, shim: Path) -> None:
        self.config = soak_config(
            self.work / "hosts.toml",
            self.hosts,
            self.key,
            self.known,
            shim,
            self.cluster,
            self.hook.port,
        )
        with self.config.open("a") as f:
            f.write(tb_config_entry(self.container / "workspace" / "tb" / "runs"))
        self.state_dir = self.work / "state"

    def start_trainer(self, state: RunState, backfill: int = 0) -> None:
        argv = [
            sys.executable, str(self.container / "workspace" / TRAIN_SCRIPT), "--run", state.name,
            "--cluster", self.cluster, "--log", str(state.log), "--backfill-steps", str(backfill),
            "--interval", "0.3", "--seed", str(self.rng.randrange(1 << 30)), "--parent-pid", str(os.getpid()),
            "--total-steps", "100000000"]  # fmt: skip  # the default 70,000 ends one after 35 min
        state.trainer = subprocess.Popen(
            argv, cwd=self.container, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip

    def start_vllm(self) -> None:
        """A process on the eval host serving vLLM's counters (as the host sees it: 127.0.0.1)."""
        (self.hosts["eval"].home / "vllm.log").write_text("INFO vLLM API server started\n")
        code = (
            "import sys, time, random; sys.path.insert(0, sys.argv[1]);"
            "from tests.monitor.metrics_server import VllmRegistry, MetricsServer;"
            "reg = VllmRegistry(k=4); srv = MetricsServer(reg.registry, port=int(sys.argv[2]));"
            "threading = __import__('threading'); threading.Thread(target=srv.httpd.serve_forever, daemon=True).start();"
            "rng = random.Random(1)\n"
            "while True:\n reg.draft([rng.randint(2, 4) for _ in range(5)]); time.sleep(1)"
        )
        ns = self.hosts["eval"].ns.name
        argv = [
            "ip", "netns", "exec", ns, sys.executable, "-c", code, str(ROOT),
            str(METRICS_PORT), f"{PREFIX}-vllm-serve",
        ]  # fmt: skip
        self.vllm = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip

    def cli(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "dflash_tui", *args, "--config", str(self.config)],
            capture_output=True, text=True, timeout=timeout, env=self.env,
        )  # fmt: skip

    def start_console(self) -> None:
        command = (
            f"exec env -u COLUMNS -u LINES TERM=tmux-256color PYTHONPATH={ROOT / 'src'} "
            f"{sys.executable} -m dflash_tui --config {self.config}"
        )
        if not self.tmux("list-sessions", "-F", "#{session_name}").split().count("console"):
            self.tmux("new-session", "-d", "-s", "console", "-x", "160", "-y", "48", command)
        else:
            self.tmux("respawn-pane", "-k", "-t", "console", command)
        self.console_starts += 1
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            pid = self.tmux.pane_pid("console")
            if (
                pid
                and "dflash_tui" in cmdline(pid)
                and "run0" in self.tmux("capture-pane", "-p", "-t", "console")
            ):
                self.console_pid = pid
                return
            time.sleep(0.5)
        screen = self.tmux("capture-pane", "-p", "-t", "console")
        raise RuntimeError(f"the console did not show its runs within 60 s; its screen:\n{screen}")

    def start_watch(self) -> None:
        out = (self.work / "watch.out").open("wb")
        self.watch = subprocess.Popen(
            [sys.executable, "-m", "dflash_tui", "watch", "--config", str(self.config)],
            stdout=out, stderr=subprocess.STDOUT, env=self.env,
        )  # fmt: skip

    def start_followers(self) -> None:
        for run in RUNS:
            proc = subprocess.Popen(
                [sys.executable, "-m", "dflash_tui", "logs", run, "-f", "-n", "1000000", "--config", str(self.config)],
                stdout=subprocess.PIPE, stderr=(self.work / f"follow-{run}.err").open("wb"), env=self.env,
            )  # fmt: skip
            follower = Follower(run, proc)
            self.followers[run] = follower
            threading.Thread(target=self._read_follower, args=(follower,), daemon=True).start()

    @staticmethod
    def _read_follower(follower: Follower) -> None:
        assert follower.proc.stdout is not None
        for raw in follower.proc.stdout:
            follower.seen.append(raw.rstrip(b"\n").decode("utf-8", "replace"))

    def start_tails(self) -> list[int]:
        train = self.hosts["train"]
        for i, run in enumerate(RUNS):
            ssh = (
                f"ssh -F /dev/null -i {self.key.private} -o UserKnownHostsFile={self.known} "
                f"-o StrictHostKeyChecking=yes -o BatchMode=yes -o ServerAliveInterval=15 root@{train.ns.address} "
                f"{self.work / 'bin' / 'pct'} exec 200 -- tail -n 20 -F workspace/train_{run}.log"
            )
            loop = f"while :; do {ssh}; sleep 2; done"  # as a person would re-run it after a drop
            if i == 0:
                self.tails("new-session", "-d", "-s", "tails", "-x", "160", "-y", "48", loop)
            else:
                self.tails("new-window", "-t", "tails", loop)
        time.sleep(3)
        return self.tail_pids()

    def tail_pids(self) -> list[int]:
        server = self.tails("display-message", "-p", "#{pid}").strip()
        if not server.isdigit():
            return []
        return [
            int(server),
            *(
                p
                for p in descendants(int(server))
                if cmdline(p).startswith(("ssh ", "sh ", "bash "))
            ),
        ]

    def unseen(self, state: RunState, timeout: float) -> int:
        """Lines now in the log the follower has not seen, after waiting up to `timeout` for
        it to catch up (a truncation must not destroy lines a connected follower could read)."""
        deadline = time.monotonic() + timeout
        while True:
            missing = sum((state.lines() - Counter(self.followers[state.name].seen)).values())
            if not missing or time.monotonic() >= deadline:
                return missing
            time.sleep(0.5)

    def account(self, state: RunState, timeout: float) -> None:
        """Before the log is truncated or replaced: what the follower could not read within
        `timeout` counts as destroyed while cut; every line counts as written."""
        state.unobservable += self.unseen(state, timeout)
        state.snapshot()

    def destroy_log(self, state: RunState, how: Callable[[], None]) -> None:
        """Pause the trainer, let the follower catch up, take the lines, then rotate/truncate."""
        assert state.trainer is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(state.trainer.pid, signal.SIGSTOP)
        try:
            self.account(state, 20)
            how()
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(state.trainer.pid, signal.SIGCONT)

    # ------------------------------------------------------------------ faults

    def fault(self, kind: str) -> dict[str, Any]:
        rng = self.rng
        record: dict[str, Any] = {"kind": kind, "start": time.time()}
        if kind in ("cut", "spike"):
            host = self.hosts[rng.choice(["train", "eval", "storage"])]
            record["host"] = host.name
            if kind == "cut":
                record["seconds"] = secs = rng.uniform(20, 60)
                host.cut(True)
                time.sleep(secs)
                host.cut(False)
            else:
                record["seconds"] = secs = rng.uniform(15, 40)
                host.squeeze(True)
                time.sleep(secs)
                host.squeeze(False)
        elif kind == "sshd_restart":
            host = self.hosts[rng.choice(["train", "eval", "storage"])]
            record["host"] = host.name
            host.sshd.process and host.sshd.process.terminate()  # sessions live on, as with systemctl restart
            with contextlib.suppress(subprocess.TimeoutExpired):
                host.sshd.process and host.sshd.process.wait(5)
            host.sshd.process = None
            host.sshd.start()
        elif kind == "reboot":
            host = self.hosts[rng.choice(["train", "storage"])]
            record["host"] = host.name
            host.power_off()
            if host.name == "train":  # every trainer dies with the host, at once
                self.tb.kill()
                for state in self.runs.values():
                    self.kill_trainer(state, account=False)
            record["seconds"] = secs = rng.uniform(20, 45)
            time.sleep(secs)
            host.sshd.start()
            if host.name == "train":
                self.tb.start()
                for state in self.runs.values():
                    self.account(state, 30)  # read what the host had, then it is replaced
                    self.start_trainer(state)
        elif kind in ("rotate", "truncate"):
            state = self.runs[rng.choice(RUNS)]
            record["run"] = state.name

            def rotate() -> None:
                shutil.copy(state.log, state.log.with_suffix(".log.1"))
                os.truncate(state.log, 0)

            self.destroy_log(
                state, rotate if kind == "rotate" else lambda: os.truncate(state.log, 0)
            )
        elif kind == "crash":
            state = self.runs[rng.choice(RUNS)]
            record["run"] = state.name
            self.kill_trainer(state)
            record["seconds"] = secs = rng.uniform(25, 50)
            time.sleep(secs)
            self.start_trainer(state)
        elif kind == "disk_full":
            assert self.mounted is not None
            filler = self.mounted / "filler"
            free = shutil.disk_usage(self.mounted).free
            with filler.open("wb") as f:
                f.truncate(0)
            subprocess.run(
                ["fallocate", "-l", str(max(free - (8 << 20), 1 << 20)), str(filler)], check=False
            )
            record["seconds"] = secs = rng.uniform(60, 120)
            time.sleep(secs)
            filler.unlink(missing_ok=True)
        elif kind == "console_kill":
            job = self.start_eval("console_kill")
            record["job"] = job
            time.sleep(rng.uniform(2, 6))
            if self.console_pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.console_pid, signal.SIGKILL)
            time.sleep(3)
            self.start_console()
        record["end"] = time.time()
        return record

    def kill_trainer(self, state: RunState, *, account: bool = True) -> None:
        """The trainer dies; its log is counted now (`account`, the host up) or by the caller,
        before the restarted trainer renames a new log over it."""
        if state.trainer is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(state.trainer.pid, signal.SIGKILL)
            state.trainer.wait()
        if account:
            self.account(state, 20)

    # ------------------------------------------------------------------ work

    def start_eval(self, why: str) -> str | None:
        out = self.cli("eval", "zlab", demo_assets.SUITE_NAME, "--json", timeout=300)
        job = None
        with contextlib.suppress(ValueError, AttributeError, TypeError, KeyError):
            job = json.loads(out.stdout)["job"]["id"]
        self.evals.append({"why": why, "job": job, "started": time.time(), "start_rc": out.returncode,
                           "start_error": None if job else (out.stderr.strip() or out.stdout.strip())[-300:]})  # fmt: skip
        return job

    @contextlib.contextmanager
    def job_slot(self) -> Any:
        """One relay or eval job: none starts while a quiet stretch is measured, and a quiet
        stretch waits until those under way have ended."""
        with self.flight:
            while self.resting.is_set() and not self.stop.is_set():
                self.flight.wait(1.0)
            self.in_flight += 1
        try:
            yield
        finally:
            with self.flight:
                self.in_flight -= 1
                self.flight.notify_all()

    def relay_loop(self) -> None:
        n = 0
        while not self.stop.is_set():
            n += 1
            if self.resume_interrupted(n):
                continue
            via = "form" if n % 3 == 0 else "cli"
            name = f"r{n}.bin"
            record: dict[str, Any] = {
                "n": n,
                "via": via,
                "dst": f"storage:{self.mounted}/{name}",
                "started": time.time(),
            }
            with self.job_slot():
                if via == "cli":
                    out = self.cli(
                        "relay", "train:big.bin", f"storage:{self.mounted}/{name}", timeout=900
                    )
                    record["rc"] = out.returncode
                    record["said"] = (out.stderr.strip() or out.stdout.strip()).splitlines()[-1:]
                else:
                    self.form_relay("train:big.bin", f"storage:{self.mounted}/{name}")
                    self.wait_transfer_end(f"{self.mounted}/{name}", 900)
                self.end_relay(record, name)
            self.stop.wait(self.rng.uniform(20, 60))

    def resume_interrupted(self, n: int) -> bool:
        """As an operator would: a relay left `interrupted` (its console was killed) is
        resumed; its `.part` is removed if that fails too, so the tmpfs has room again."""
        rows = [r for r in self.transfers() if r.get("state") == "interrupted"]
        row = next((r for r in rows if r.get("id") not in self.resumed), None)
        if row is None or self.mounted is None:
            return False
        self.resumed.add(row.get("id"))
        name = str(row.get("dst")).rsplit("/", 1)[-1]
        record: dict[str, Any] = {"n": n, "via": "resume", "dst": row.get("dst")}
        with self.job_slot():
            record["started"] = time.time()
            out = self.cli("relay", "--resume", str(row.get("id")), timeout=900)
            record["rc"] = out.returncode
            record["said"] = (out.stderr.strip() or out.stdout.strip()).splitlines()[-1:]
            self.end_relay(record, name)
            (self.mounted / f"{name}.part").unlink(missing_ok=True)
        self.stop.wait(self.rng.uniform(20, 60))
        return True

    def end_relay(self, record: dict[str, Any], name: str) -> None:
        """A relay has ended: its outcome recorded, its copy removed (room for the next)."""
        record["ended"] = time.time()
        self.check_relay(record, name)
        self.relays.append(record)
        if self.mounted:
            (self.mounted / name).unlink(missing_ok=True)

    def form_relay(self, src: str, dst: str) -> None:
        with self.typing:
            type_relay(self.tmux, src, dst)

    def transfers(self) -> list[dict[str, Any]]:
        out = self.cli("relay", "--list", "--json", timeout=60)
        with contextlib.suppress(ValueError):
            rows = json.loads(out.stdout)
            return rows if isinstance(rows, list) else []
        return []

    def wait_transfer_end(self, dst_part: str, timeout: float) -> None:
        """Until the form's relay has ended; given up after 90 s if none started (the keys
        reached a console that was restarting), so the schedule is not held up."""
        started = time.monotonic()
        deadline = started + timeout
        while time.monotonic() < deadline and not self.stop.is_set():
            rows = [r for r in self.transfers() if dst_part in str(r.get("dst"))]
            if any(r.get("state") != "running" for r in rows):
                return
            if not rows and time.monotonic() - started > 90:
                return
            time.sleep(5)

    def check_relay(self, record: dict[str, Any], name: str) -> None:
        assert self.mounted is not None
        final = self.mounted / name
        rows = [r for r in self.transfers() if f"{self.mounted}/{name}" in str(r.get("dst"))]
        row = rows[0] if rows else None  # `relay --list` is newest first
        record["state"] = row.get("state") if row else None
        record["reason"] = (row or {}).get("error")
        if row is None and not final.exists() and record["via"] == "form":
            record["reason"] = "the relay form started no transfer within 90 s"
        if final.exists():
            with final.open("rb") as f:
                ok = hashlib.file_digest(f, "sha256").hexdigest() == self.big_sha
            record["outcome"] = "verified" if ok else "corrupted"
        else:
            record["outcome"] = "failed"
            if not record.get("reason") and record.get("said"):
                record["reason"] = record["said"][-1]
        record["parts_left"] = (
            [p.name for p in self.mounted.glob("*.part")] if record["outcome"] == "verified" else []
        )

    def eval_loop(self) -> None:
        while not self.stop.wait(self.rng.uniform(120, 240)):
            with self.job_slot():
                job = self.start_eval("scheduled")
                deadline = time.monotonic() + 600
                while job and time.monotonic() < deadline and not self.stop.is_set():
                    out = self.cli("jobs", job, "--json", timeout=120)
                    with contextlib.suppress(ValueError, AttributeError):
                        if json.loads(out.stdout).get("state") in (
                            "done",
                            "failed",
                            "lost",
                            "cancelled",
                        ):
                            break
                    self.stop.wait(10)

    def monkey_loop(self) -> None:
        rng = random.Random(self.args.seed + 1)
        while not self.stop.wait(rng.uniform(1.5, 4.0)):
            if self.typing.locked() or self.resting.is_set():
                continue  # the relay form is being typed into, or the console is at rest
            self.tmux("send-keys", "-t", "console", rng.choice(MONKEY_KEYS))

    # ------------------------------------------------------------------ measuring

    def quiet_stretch(self, seconds: float) -> None:
        """CPU of the console, watch and the ssh tails (with their tmux) over one quiet window:
        no fault, no monkey key, no relay or eval job under way (new ones wait)."""
        if not self.console_pid or seconds <= 0:
            time.sleep(max(0.0, seconds))
            return
        self.resting.set()
        try:
            with self.flight:
                rested = self.flight.wait_for(lambda: self.in_flight == 0, timeout=300)
            time.sleep(5)  # the last relay's or job's end settles
            self._measure(seconds, rested)
        finally:
            self.resting.clear()
            with self.flight:
                self.flight.notify_all()

    def _measure(self, seconds: float, rested: bool) -> None:
        assert self.console_pid is not None
        console = [self.console_pid, *self.tmux.server_pids()]
        tails = self.tail_pids()
        groups = {"console": console, "watch": [self.watch.pid], "tails": tails}
        with contextlib.suppress(OSError):
            before = {k: sum(cpu_s(p) for p in v) for k, v in groups.items()}
            t0 = time.monotonic()
            time.sleep(seconds)
            wall = time.monotonic() - t0
            after = {k: sum(cpu_s(p) for p in v) for k, v in groups.items()}
            cpu = {k: 100 * (after[k] - before[k]) / wall for k in groups}
            self.quiet.append(cpu | {"seconds": wall, "at": time.time(), "rested": float(rested)})

    # ------------------------------------------------------------------ the soak

    def soak(self) -> dict[str, Any]:
        self.start_watch()
        self.start_followers()
        self.start_tails()
        self.start_console()
        time.sleep(20)  # the console reads every history once
        self.rss["start"] = rss_mib(self.console_pid) if self.console_pid else 0.0
        fds_start = len(os.listdir(f"/proc/{self.console_pid}/fd")) if self.console_pid else 0
        sessions_start = ssh_connections([h.ns.name for h in self.hosts.values()])
        started = time.monotonic()
        end = started + self.args.minutes * 60
        workers = [
            threading.Thread(target=f, daemon=True)
            for f in (self.relay_loop, self.eval_loop, self.monkey_loop)
        ]
        for w in workers:
            w.start()
        kinds = list(self.args.faults)
        self.rng.shuffle(kinds)
        i = 0
        while time.monotonic() < end - 60:
            self.quiet_stretch(min(30.0, max(5.0, end - 60 - time.monotonic())))
            if (
                "half" not in self.rss
                and time.monotonic() - started >= self.args.minutes * 30
                and self.console_pid
            ):
                with contextlib.suppress(OSError):
                    self.rss["half"] = rss_mib(self.console_pid)
            if time.monotonic() >= end - 60:
                break
            kind = kinds[i % len(kinds)] if i < len(kinds) else self.rng.choice(kinds)
            i += 1
            log(f"fault {i}: {kind}")
            try:
                self.faults.append(self.fault(kind))
            except Exception as exc:  # a fault that could not be made is reported, not fatal
                self.faults.append({"kind": kind, "start": time.time(), "error": repr(exc)})
                log(f"fault {kind} could not be made: {exc!r}")
            time.sleep(max(0.0, min(self.rng.uniform(20, 40), end - 60 - time.monotonic())))
        log("faults over: letting everything settle")
        self.stop.set()
        for w in workers:
            w.join(timeout=900)
        time.sleep(30)
        alive = bool(self.console_pid) and Path(f"/proc/{self.console_pid}").exists()
        rss_end = rss_mib(self.console_pid) if alive and self.console_pid else 0.0
        fds_end = len(os.listdir(f"/proc/{self.console_pid}/fd")) if alive else 0
        sessions_end = ssh_connections([h.ns.name for h in self.hosts.values()])
        self.tb.kill()  # its files are final before `status` reads them for the report
        for state in self.runs.values():
            # the trainer stops first: a line written after the last look would be seen
            # and not counted as written (a false repeat)
            if state.trainer is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(state.trainer.pid, signal.SIGSTOP)
            self.unseen(state, 30)
            state.snapshot()
            self.final_seen[state.name] = list(self.followers[state.name].seen)
        return self.report(alive, rss_end, (fds_start, fds_end), (sessions_start, sessions_end))

    # ------------------------------------------------------------------ the report

    def report(
        self, alive: bool, rss_end: float, fds: tuple[int, int], sessions: tuple[int, int]
    ) -> dict[str, Any]:
        runs = {}
        for name, state in self.runs.items():
            seen = self.final_seen.get(name, self.followers[name].seen)
            runs[name] = line_counts(state.written, seen, state.unobservable)
            (self.work / f"seen-{name}.txt").write_text("\n".join(seen) + "\n")
        messages = [(m.at, m.title + "\n" + m.message) for m in self.hook.messages]
        evals = eval_outcomes(self.evals, self.cli("jobs", "--json", timeout=120).stdout)
        cpu = cpu_at_rest(self.quiet)
        console = {
            "alive": alive,
            "starts": self.console_starts,
            "rss_mib": {k: round(v, 1) for k, v in self.rss.items()} | {"end": round(rss_end, 1)},
            "fds": {"start": fds[0], "end": fds[1]},
            "ssh_connections_open": {"start": sessions[0], "end": sessions[1]},
            "unexpected_errors": error_entries(self.state_dir / ERROR_LOG_NAME),
        }
        alerts = alert_counts(self.faults, messages)
        return {
            "totals": totals(runs, self.relays, evals, alerts, console, cpu),
            "seed": self.args.seed,
            "minutes": self.args.minutes,
            "runs": runs,
            "relays": self.relays,
            "evals": evals,
            "alerts": alerts,
            "faults": self.faults,
            "console": console,
            "cpu_quiet_pct": cpu,
            "tensorboard": self.tb.report(self.cli("status", "--json", timeout=120).stdout),
            "webhook_messages": [
                f"{at:.0f} {' | '.join(m.splitlines()[:2])}" for at, m in messages
            ],
        }

    def close(self) -> None:
        self.stop.set()
        for tmux in (self.tmux, self.tails):
            with contextlib.suppress(Exception):
                tmux.kill()
        tb = getattr(getattr(self, "tb", None), "proc", None)
        for proc in [getattr(self, "vllm", None), tb, *(s.trainer for s in self.runs.values())]:
            if proc is not None and proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
        for proc in [getattr(self, "watch", None), *(f.proc for f in self.followers.values())]:
            if proc is not None and proc.poll() is None:
                proc.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(5)
                proc.kill()
        for host in self.hosts.values():
            with contextlib.suppress(Exception):
                host.cut(False)
                host.squeeze(False)
            host.sshd.stop()
            delete_namespace(host.ns.name)
        if self.mounted is not None:
            subprocess.run(["umount", "-l", str(self.mounted)], check=False)
        self.hook.stop()
        if not self.args.keep:
            shutil.rmtree(self.work, ignore_errors=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=60.0)
    p.add_argument("--seed", type=int, default=36)
    p.add_argument(
        "--faults", type=lambda t: t.split(","), default=list(FAULTS),
        help=f"the kinds of fault to draw from, comma-separated (default: all, {','.join(FAULTS)})",
    )  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("--keep", action="store_true", help="keep the work folder (its path is logged)")
    args = p.parse_args()
    if unknown := set(args.faults) - set(FAULTS):
        p.error(f"--faults: no such kind {', '.join(sorted(unknown))} (kinds: {', '.join(FAULTS)})")
    for tool in ("tmux", "ssh", "tc", "ip", "fallocate"):
        if shutil.which(tool) is None:
            print(f"needs {tool}", file=sys.stderr)
            return 2
    chaos = Chaos(args)
    log(f"work folder {chaos.work}")
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        chaos.setup()
        report = chaos.soak()
    finally:
        chaos.close()
    if args.json:
        print(json.dumps(report, default=str))
    else:
        print_report(report)
    return 1 if failed(report["totals"]) else 0


if __name__ == "__main__":
    sys.exit(main())
