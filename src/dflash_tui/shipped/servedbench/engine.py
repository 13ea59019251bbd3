"""The engine process: its command line, its start, its readiness, and its stop on every path.

The engine command comes from the host's config (`vllm = "PATH"` or an argv
list, likewise `sglang`). The engine runs in this program's process group, so
`dflash-tui cancel` (which kills the job's group) stops it too; this program
stops it itself on every other path: TERM to the engine, then KILL to every
other member of the group (an engine's workers) that is not this program or
the job's shell.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..common.errors import InputError, RunFailure
from .client import http_get

STOP_GRACE_S = 15.0
LOG_LINES = 15
OOM_WORDS = ("out of memory", "OutOfMemoryError", "CUDA error: out of memory", "Cannot allocate")
PORT_WORDS = ("address already in use", "Errno 98")


@dataclass(frozen=True)
class EngineSpec:
    """What to serve: the engine, its command, the target, and the drafter (None: target alone)."""

    engine: str  # "vllm" or "sglang"
    command: tuple[str, ...]
    target: str
    drafter: str | None
    k: int
    dtype: str
    port: int
    extra: tuple[str, ...] = ()

    def _dtype(self) -> list[str]:
        """`--dtype` only when asked: "auto" leaves it to the engine (or to the host's
        engine command, which may carry its own `--dtype`)."""
        return [] if self.dtype == "auto" else ["--dtype", self.dtype]

    def argv(self) -> list[str]:
        """The full engine command line (vLLM: `vllm serve` or its api_server module)."""
        argv = list(self.command)
        if self.engine == "sglang":
            argv += ["--model-path", self.target, "--host", "127.0.0.1", "--port", str(self.port)]
            argv += ["--trust-remote-code", *self._dtype()]
            if self.drafter is not None:
                argv += ["--speculative-algorithm", "DFLASH"]
                argv += ["--speculative-draft-model-path", self.drafter]
                argv += ["--speculative-num-draft-tokens", str(self.k + 1)]
            return [*argv, *self.extra]
        if Path(argv[-1]).name == "vllm":
            argv += ["serve", self.target]
        else:
            argv += ["--model", self.target]
        argv += ["--host", "127.0.0.1", "--port", str(self.port), *self._dtype()]
        argv += ["--served-model-name", "dflash-bench"]
        if self.drafter is not None:
            config = {"method": "dflash", "model": self.drafter, "num_speculative_tokens": self.k}
            argv += ["--speculative-config", json.dumps(config)]
        return [*argv, *self.extra]


def check_command(engine: str, command: Sequence[str], host_key: str) -> None:
    """Refuse an engine command whose program is not on this host."""
    program = command[0] if command else ""
    found = shutil.which(program) if "/" not in program else program
    if not found or not os.access(found, os.X_OK) or os.path.isdir(found):
        raise RunFailure(
            f"no {engine} engine on this host: {program or '(empty command)'} is not an "
            "executable here",
            hint=f"set [hosts.<name>] {host_key} in hosts.toml to the engine's path or argv list, "
            'e.g. ["/root/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server"]',
        )


def free_port() -> int:
    """A loopback port nobody listens on now (the engine binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def check_port_free(port: int) -> None:
    """Refuse a port another process already listens on (the engine would not start)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            raise InputError(
                f"port {port} on 127.0.0.1 is taken by another process",
                hint="leave --port out (a free port is picked) or stop what listens there",
            ) from None


class Engine:
    """One running engine: started by `start`, stopped by `stop` (safe to call twice)."""

    def __init__(self, spec: EngineSpec, log_path: Path) -> None:
        self.spec = spec
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            try:
                self.proc = subprocess.Popen(
                    self.spec.argv(),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                )
            except OSError as exc:
                raise RunFailure(
                    f"cannot start the {self.spec.engine} engine {self.spec.command[0]}: "
                    f"{exc.strerror or exc}"
                ) from None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.spec.port}"

    def last_lines(self, n: int = LOG_LINES) -> list[str]:
        with contextlib.suppress(OSError):
            with self.log_path.open("rb") as f:
                lines = deque(f, maxlen=n)
            return [line.decode("utf-8", "replace").rstrip() for line in lines]
        return []

    def died(self, when: str) -> RunFailure:
        """The failure for an engine that exited (`when`: while starting, mid-run): its reason
        read from its last log lines."""
        code = self.proc.poll() if self.proc else None
        lines = self.last_lines()
        text = "\n".join(lines)
        if any(w.lower() in text.lower() for w in OOM_WORDS):
            headline = f"the {self.spec.engine} engine ran out of memory {when}"
            hint = "free the GPU, lower the model's max length, or use a larger GPU"
        elif any(w.lower() in text.lower() for w in PORT_WORDS):
            headline = f"the {self.spec.engine} engine could not bind port {self.spec.port} {when}"
            hint = "another process took the port; run the bench again"
        else:
            headline = f"the {self.spec.engine} engine exited with status {code} {when}"
            hint = f"its log is {self.log_path} on this host"
        return RunFailure(headline, [f"engine: {line}" for line in lines if line], hint)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def exits_within(self, seconds: float) -> bool:
        """Whether the engine has exited or does within `seconds` (a dropped connection is
        often the first sign of an engine dying: its exit follows a moment later)."""
        if self.proc is None:
            return True
        try:
            self.proc.wait(seconds)
        except subprocess.TimeoutExpired:
            return False
        return True

    def wait_healthy(self, deadline_s: float, on_wait: Callable[[float], None]) -> None:
        """Until `/health` answers 200; RunFailure when the engine exits or the deadline passes."""
        start = time.monotonic()
        while True:
            if not self.alive():
                raise self.died("while starting")
            with contextlib.suppress(OSError, ValueError):
                status, _ = http_get(f"{self.url}/health", timeout=2.0)
                if status == 200:
                    return
            waited = time.monotonic() - start
            if waited > deadline_s:
                failure = self.died(f"(no healthy /health within {deadline_s:.0f} s)")
                failure.message = (
                    f"the {self.spec.engine} engine did not become healthy within "
                    f"{deadline_s:.0f} s"
                )
                raise RunFailure(failure.message, failure.problems, failure.hint)
            on_wait(waited)
            time.sleep(0.5)

    def stop(self) -> None:
        """TERM the engine, wait, then KILL whatever of it is left (its workers too)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        family = descendants(proc.pid)  # before the TERM: orphans lose their parent link
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(STOP_GRACE_S)
        group = os.getpgrp()
        for pid in family:
            if _group_of(pid) == group:  # still ours (not a reused pid)
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired, OSError):
            proc.kill()
            proc.wait(5.0)


def _stat_fields(pid: int) -> list[str]:
    """Fields 3.. of /proc/PID/stat (state, ppid, pgrp, ...); [] when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    except (OSError, IndexError):
        return []


def _group_of(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[2]) if len(fields) > 2 else None


def descendants(root: int) -> list[int]:
    """Every process below `root` now (from /proc; empty where there is none)."""
    children: dict[int, list[int]] = {}
    proc = Path("/proc")
    for entry in proc.iterdir() if proc.is_dir() else ():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if len(fields) > 1:
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found
