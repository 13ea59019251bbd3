"""The demo cluster: three SSH hosts in one process, trainers, and a matching hosts.toml.

- `trainbox` stands in for a Proxmox node: commands reach the training
  container through a `pct exec 200 --` shim, as on the operators' machines.
- `evalbox` is the GPU box where evals run (its python is this one).
- `storage` holds checkpoints.

Every host has its own root folder under one base directory, a generated host
key, and a fake `nvidia-smi` where it has GPUs. The config, known_hosts and the
client key are written next to them, so any dflash-tui command can be pointed
at the demo with `--config`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import asyncssh

from dflash_tui.demo import assets as demo_assets
from dflash_tui.demo import trainer
from dflash_tui.demo.shell_server import ShellServer

PCT_SHIM = """#!/bin/sh
# Demo stand-in for Proxmox `pct exec ID -- CMD...`: runs CMD inside "container" ID.
if [ "$1" != exec ] || [ "$3" != -- ]; then
    echo "pct: usage: pct exec ID -- COMMAND [ARG...]" >&2
    exit 2
fi
ct="$HOME/ct$2"
shift 3
[ -d "$ct" ] || { echo "pct: container does not exist: $ct" >&2; exit 2; }
cd "$ct" || exit 2
HOME="$ct" container=lxc exec "$@"
"""

NVIDIA_SMI = """#!/bin/sh
# Demo stand-in for nvidia-smi: {count} GPUs, in nvidia-smi's own CSV forms
# (--format=csv,noheader,nounits): --query-gpu with the probe's fields (index, name,
# util, memory, uuid, temperature, power draw and limit, throttle bitmask; a busy
# GPU is power capped now and then), and --query-compute-apps=pid,gpu_uuid,used_memory:
# each process matching "{busy_pattern}" holds `per` GPUs in turn (all but two of them
# shared out), so a host with a run alive also shows GPUs sitting idle.
now=$(date +%s)
pids=$(pgrep -f "{busy_pattern}" 2>/dev/null | sort -n | head -n {count})
busy=$(printf '%s\n' $pids | grep -c .)
per=1
[ "$busy" -gt 0 ] && [ $(( ({count} - 2) / busy )) -gt 1 ] && per=$(( ({count} - 2) / busy ))
case "$*" in
*"--query-gpu=index,name "*|*--query-gpu=index,name)
    # the served bench's question: which GPUs this job sees
    i=0; while [ $i -lt {count} ]; do echo "$i, {model}"; i=$((i + 1)); done
    exit 0 ;;
*--query-compute-apps*)
    k=0
    for pid in $pids; do
        j=0
        while [ $j -lt $per ]; do
            i=$(( k * per + j ))
            echo "$pid, GPU-5f2c9a1e-7d3b-4e60-9c1a-00000000000$i, $(( 71000 + (now + i * 131) % 4000 - 600 ))"
            j=$((j + 1))
        done
        k=$((k + 1))
    done
    exit 0 ;;
esac
i=0
while [ $i -lt {count} ]; do
    if [ $i -lt $(( busy * per )) ]; then
        util=$(( 88 + (now / 3 + i * 7) % 11 )); mem=$(( 71000 + (now + i * 131) % 4000 ))
        temp=$(( 58 + (now / 7 + i) % 9 )); power="$(( 560 + (now / 2 + i * 13) % 130 )).45"
        if [ $(( (now / 20 + i) % 5 )) -eq 0 ]; then reasons=0x0000000000000004; else reasons=0x0000000000000000; fi
    else
        util=0; mem=4; temp=$(( 33 + i % 4 )); power="69.85"; reasons=0x0000000000000001
    fi
    echo "$i, {model}, $util, $mem, 81559, GPU-5f2c9a1e-7d3b-4e60-9c1a-00000000000$i, $temp, $power, 700.00, $reasons"
    i=$((i + 1))
done
"""


class DemoHostServer(Protocol):
    """What serves one demo host: its port, its known_hosts line, and a way to stop."""

    port: int

    def known_hosts_line(self) -> str: ...
    async def stop(self) -> None: ...


ServeHost = Callable[
    [str, Path, asyncssh.SSHKey, str, dict[str, str], int], Awaitable[DemoHostServer]
]


async def serve_with_shell_server(
    name: str,
    root: Path,
    host_key: asyncssh.SSHKey,
    authorized: str,
    env: dict[str, str],
    port: int,
) -> DemoHostServer:
    """The demo's own host: an asyncssh server in this process running /bin/sh in `root`."""
    return await ShellServer(name, root, host_key, authorized, env).start(port)


def path_without(command: str, path: str, shadow_root: Path) -> list[str]:
    """The folders of `path`, each one holding `command` replaced by a shadow without it.

    A shadow is a folder of symlinks to everything else in the original (built
    afresh under `shadow_root`), so a PATH keeps every tool but `command`.
    Folders without `command` are kept as they are.
    """
    shutil.rmtree(shadow_root, ignore_errors=True)
    kept: list[str] = []
    for i, folder in enumerate(p for p in path.split(os.pathsep) if p):
        real = Path(folder)
        if not (real / command).exists():
            kept.append(folder)
            continue
        shadow = shadow_root / str(i)
        shadow.mkdir(parents=True)
        for entry in os.scandir(real):
            if entry.name != command:
                (shadow / entry.name).symlink_to(real / entry.name)
        kept.append(str(shadow))
    return kept


@dataclass(frozen=True)
class DemoRun:
    name: str
    mode: str
    seed: int
    checkpoints: bool = True  # a healthy run writes checkpoints (and auto-evaluates them)
    total_steps: int = 70000  # the trainer stops there (10 steps a line)
    backfill_steps: int = 3000  # history written at start, timestamps in the past


DEMO_RUNS = (
    DemoRun("slammed5", "healthy", 5),
    DemoRun("wide-lr", "stalled", 7),
    DemoRun("ablate-ctx", "dead", 11),
)
TRAIN_SCRIPT = "train_dflash_pipeline.py"
HOSTS = ("trainbox", "evalbox", "storage")


class DemoCluster:
    """Start with `await start()` (or `serve_in_thread()`), stop with `await stop()`."""

    def __init__(
        self,
        base: Path | None = None,
        *,
        trainer_interval_s: float = 0.3,
        port_base: int | None = None,
        runs: tuple[DemoRun, ...] = DEMO_RUNS,
        eval_assets: bool = True,
        serve_host: ServeHost | None = None,
    ) -> None:
        """`serve_host` serves one host in place of the in-process ShellServer (tests
        put OpenSSH's sshd there); it gets the host's name, root, host key, the
        client's authorized key and environment, and the port (0: any)."""
        self._own_base = base is None
        self.runs = tuple(runs)
        self.build_eval_assets = eval_assets
        self.base = Path(base or tempfile.mkdtemp(prefix="dflash-demo-")).resolve()
        self.trainer_interval_s = trainer_interval_s
        self.port_base = port_base
        self.serve_host = serve_host or serve_with_shell_server
        self.servers: dict[str, DemoHostServer] = {}
        self.trainers: list[subprocess.Popen[bytes]] = []
        self.config_path = self.base / "hosts.toml"
        self.known_hosts_path = self.base / "known_hosts"
        self.client_key_path = self.base / "client" / "id_ed25519"
        self.eval_assets: demo_assets.DemoEvalAssets | None = None
        self._assets_thread: threading.Thread | None = None
        self._system_path: list[str] | None = None

    # ------------------------------------------------------------------ layout

    def host_root(self, name: str) -> Path:
        return self.base / name

    @property
    def container_root(self) -> Path:
        return self.host_root("trainbox") / "ct200"

    def log_path(self, run: str) -> Path:
        return self.container_root / "workspace" / f"train_{run}.log"

    def _write_tools(self) -> None:
        shared_bin = self.base / "bin"
        shared_bin.mkdir(parents=True, exist_ok=True)
        _write_exe(shared_bin / "pct", PCT_SHIM)
        gpus = {
            # This demo's trainers only (another demo on this machine has its own).
            "trainbox": (
                8,
                "NVIDIA H100 80GB HBM3",
                f"{self.container_root}/workspace/{TRAIN_SCRIPT}",
            ),
            "evalbox": (1, "NVIDIA H100 80GB HBM3", "dflash-tui/harness/"),
        }
        for host, (count, model, pattern) in gpus.items():
            host_bin = self.host_root(host) / "bin"
            host_bin.mkdir(parents=True, exist_ok=True)
            script = NVIDIA_SMI.replace("{count}", str(count)).replace("{model}", model)
            _write_exe(host_bin / "nvidia-smi", script.replace("{busy_pattern}", pattern))
        self.container_root.joinpath("workspace").mkdir(parents=True, exist_ok=True)
        shutil.copy(trainer.__file__, self.container_root / "workspace" / TRAIN_SCRIPT)
        for host in ("evalbox", "storage"):
            (self.host_root(host) / "models").mkdir(parents=True, exist_ok=True)

    def _key(self, path: Path) -> asyncssh.SSHKey:
        """Reuse a key kept in the demo's folder, so known_hosts stays valid across restarts."""
        if path.exists():
            return asyncssh.read_private_key(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        key = asyncssh.generate_private_key("ssh-ed25519", comment="dflash-tui-demo")
        key.write_private_key(path)
        path.chmod(0o600)
        return key

    def _env(self, host: str) -> dict[str, str]:
        env = dict(os.environ)
        if self._system_path is None:
            # A host without a fake nvidia-smi must have none: on a machine with real
            # GPUs, /usr/bin/nvidia-smi would otherwise show them on `storage`.
            self._system_path = path_without(
                "nvidia-smi", env.get("PATH", "/usr/bin:/bin"), self.base / "sysbin"
            )
        path = [
            str(self.host_root(host) / "bin"),
            str(self.base / "bin"),
            str(Path(sys.executable).parent),
            *self._system_path,
        ]
        env.update(
            PATH=os.pathsep.join(path), HOME=str(self.host_root(host)), DFLASH_DEMO_HOST=host
        )
        env.pop("SSH_AUTH_SOCK", None)
        return env

    def write_config(self) -> Path:
        ports = {name: server.port for name, server in self.servers.items()}
        self.config_path.write_text(demo_config_text(ports, runs=self.runs))
        self.known_hosts_path.write_text(
            "".join(srv.known_hosts_line() for srv in self.servers.values())
        )
        return self.config_path

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> Path:
        """Start servers and trainers; returns the path of the demo's hosts.toml."""
        self._write_tools()
        if self.build_eval_assets:
            self._start_eval_assets()
        client_key = self._key(self.client_key_path)
        authorized = client_key.export_public_key("openssh").decode()
        for offset, name in enumerate(HOSTS):
            port = self.port_base + offset if self.port_base else 0
            try:
                self.servers[name] = await self.serve_host(
                    name,
                    self.host_root(name),
                    self._key(self.base / "keys" / f"{name}_host_key"),
                    authorized,
                    self._env(name),
                    port,
                )
            except OSError as exc:
                await self.stop()
                raise OSError(
                    f"demo host {name} cannot listen on 127.0.0.1:{port}: {exc.strerror}; "
                    "is another demo running? pick another --port-base"
                ) from None
        self.write_config()
        self._start_trainers()
        await self._wait_for_trainer_logs()
        return self.config_path

    async def _wait_for_trainer_logs(self, timeout_s: float = 120.0) -> None:
        """Return once every trainer's log holds its history (each renames it into place
        whole): the demo is a cluster that has been training for hours, so a console or
        test that starts now must find that past, not watch it arrive as new lines."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        waiting = {run.name: proc for run, proc in zip(self.runs, self.trainers, strict=True)}
        while waiting:
            for name, proc in list(waiting.items()):
                if self.log_path(name).exists():
                    del waiting[name]
                elif proc.poll() is not None:
                    await self.stop()
                    raise RuntimeError(
                        f"demo trainer {name} exited with code {proc.returncode} before "
                        f"writing {self.log_path(name)}"
                    )
            if waiting and loop.time() > deadline:
                await self.stop()
                raise RuntimeError(
                    f"demo trainers {', '.join(sorted(waiting))} wrote no log within "
                    f"{timeout_s:.0f} s"
                )
            if waiting:
                await asyncio.sleep(0.05)

    def _start_trainers(self) -> None:
        script = self.container_root / "workspace" / TRAIN_SCRIPT
        for run in self.runs:
            # A log left by an earlier demo in this folder would pass for the new history.
            self.log_path(run.name).unlink(missing_ok=True)
            argv = [
                sys.executable,
                str(script),
                "--run",
                run.name,
                # Makes the process pattern unique to this demo: every demo on a
                # machine runs its trainers there, and pgrep sees all of them.
                "--cluster",
                str(self.servers["trainbox"].port),
                "--log",
                str(self.log_path(run.name)),
                "--mode",
                run.mode,
                "--seed",
                str(run.seed),
                "--total-steps",
                str(run.total_steps),
                "--backfill-steps",
                str(run.backfill_steps),
                "--interval",
                str(self.trainer_interval_s),
                "--parent-pid",
                str(os.getpid()),
            ]
            if run.mode == "healthy" and run.checkpoints:
                argv += [
                    "--checkpoint-dir",
                    str(self.container_root / "workspace" / "checkpoints" / run.name),
                    "--checkpoint-assets",
                    str(self.container_root / demo_assets.STUDENTS_DIR),
                    "--checkpoint-every",
                    str(demo_assets.CHECKPOINT_EVERY),
                ]
            self.trainers.append(
                subprocess.Popen(
                    argv,
                    cwd=self.container_root,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )

    def _start_eval_assets(self) -> None:
        """Build the baseline, the coding suite and the trainer's checkpoints in the background
        (they need torch; without it the demo runs without evals and says so)."""

        def build() -> None:
            try:
                self.eval_assets = demo_assets.write_demo_assets(
                    self.host_root("evalbox"), self.container_root
                )
            except Exception as exc:  # the demo runs on without evals
                self.eval_assets = demo_assets.DemoEvalAssets(False, f"no eval assets: {exc}")
            if not self.eval_assets.ok and self.eval_assets.note != demo_assets.NO_TORCH:
                # (no torch: `dflash-tui demo` says so itself, around the console)
                print(f"demo: {self.eval_assets.note}", file=sys.stderr, flush=True)

        self._assets_thread = threading.Thread(target=build, name="demo-eval-assets", daemon=True)
        self._assets_thread.start()

    def wait_for_eval_assets(self, timeout_s: float = 120.0) -> demo_assets.DemoEvalAssets | None:
        """Block until the eval assets are built (or found missing); None on timeout."""
        if self._assets_thread is not None:
            self._assets_thread.join(timeout_s)
        return self.eval_assets

    async def stop(self) -> None:
        for proc in self.trainers:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.trainers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(3)
        self.trainers.clear()
        for server in self.servers.values():
            await server.stop()
        self.servers.clear()
        if self._assets_thread is not None:
            await asyncio.to_thread(self._assets_thread.join, 30)
        if self._own_base:
            shutil.rmtree(self.base, ignore_errors=True)

    @contextlib.contextmanager
    def serve_in_thread(self) -> Iterator[Path]:
        """Run the cluster on its own event loop in a thread (the console owns the main one)."""
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.start())
            except BaseException as exc:
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self.stop())
            # Sessions still open (a console that just quit) end here, on their own loop,
            # so their shell processes are reaped before the loop closes.
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        thread = threading.Thread(target=serve, name="dflash-demo", daemon=True)
        thread.start()
        ready.wait()
        if failure:
            raise failure[0]
        try:
            yield self.config_path
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)


def demo_config_text(
    ports: dict[str, int], local_prefix: str = "", runs: tuple[DemoRun, ...] = DEMO_RUNS
) -> str:
    """The demo's hosts.toml. Local paths are relative to the file (under `local_prefix`);
    remote paths are relative to each host's working directory, as with ssh and scp."""
    run_tables = []
    for run in runs:
        stall = "\nstall_after_s = 60" if run.mode == "stalled" else ""
        if run.mode == "healthy" and run.checkpoints:
            stall += f'\ncheckpoints = "workspace/checkpoints/{run.name}/step-*"'
            # Every new checkpoint is evaluated as the trainer writes it (evals.jobs.sweeps.AutoEval).
            stall += f'\nauto_eval = ["{demo_assets.SUITE_NAME}"]\nmax_parallel = 1'
        run_tables.append(
            f'[[runs]]\nname = "{run.name}"\nhost = "trainbox"\nlog = "workspace/train_{run.name}.log"\n'
            f'process = "{TRAIN_SCRIPT} --run {run.name} --cluster {ports["trainbox"]}"\n'
            f"total_steps = {run.total_steps}{stall}\n"
        )
    p = local_prefix
    return (
        f"""# The embedded demo cluster's config, as written by `dflash-tui demo`.
# Local paths are relative to this file; remote paths to each host's working directory.
[console]
results_dir = "{p}results"
state_dir = "{p}state"
known_hosts = "{p}known_hosts"
refresh_s = 2.0

# A Proxmox node: commands run inside LXC container 200 through `pct exec`.
[hosts.trainbox]
address = "127.0.0.1"
port = {ports["trainbox"]}
identity = "{p}client/id_ed25519"
exec_prefix = ["pct", "exec", "200", "--"]
roles = ["train"]

[hosts.evalbox]
address = "127.0.0.1"
port = {ports["evalbox"]}
identity = "{p}client/id_ed25519"
python = "python3"
device = "cpu"                     # the demo's GPU is a stand-in: evals run on the CPU
model_roots = ["models"]
roles = ["eval"]
# `S` (dflash-tui bench) serves the suite's target with a checkpoint as its drafter on this
# engine: here the demo's stand-in for `vllm serve`, with real draft counts (docs/evals.md
# "Served bench jobs"); on a GPU host, vllm's path or argv list
vllm = ["python3", "-m", "dflash_tui.demo.served_engine"]

[hosts.storage]
address = "127.0.0.1"
port = {ports["storage"]}
identity = "{p}client/id_ed25519"
model_roots = ["models"]
roles = ["storage"]

"""
        + "\n".join(run_tables)
        + f"""
# A vLLM or SGLang server is watched like a run: its log's acceptance lines, and exactly
# from its Prometheus endpoint when named (as its host sees it; read through that host's
# SSH connection, nothing installed there; docs/monitoring.md, "Served acceptance"):
# [[runs]]
# name = "serve-zlab"
# host = "evalbox"
# log = "workspace/vllm_serve.log"
# process = "vllm serve"
# metrics = "http://127.0.0.1:8000/metrics"

# The baseline drafter and the coding suite live on the eval host; the healthy run's
# checkpoints (on trainbox) are relayed there when evaluated.
[[checkpoints]]
name = "zlab"
host = "evalbox"
path = "{demo_assets.BASELINE_DIR}"
baseline = true

[[suites]]
name = "{demo_assets.SUITE_NAME}"
host = "evalbox"
cache = "{demo_assets.SUITE_DIR}"
target = "evalbox:{demo_assets.TARGET_DIR}"  # the model the cache was built from: `S` serves it

# Alerts and finished evals to a phone or a chat, from the console and `dflash-tui watch`
# (pip install 'dflash-tui[notify]'; docs/notify.md). ${{VAR}} in these URLs only is read
# from the environment, so tokens stay out of this file:
# [notify]
# urls = ["ntfys://ntfy.example.org/${{NTFY_TOPIC}}", "json://hooks.example.org/dflash"]
# events = ["run_dead", "host_down", "eval_finished", "eval_failed"]   # default: all
# max_per_hour = 20                                                      # per target
"""
    )


def _write_exe(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)
