"""Tiny eval assets and two real sshd hosts: `store` holds a checkpoint, `gpu` runs the evals.

The gpu host's `python` is a gate: a shell script that waits for a file to
appear before it execs this venv's python. A job started while the gate is
closed is running (its process group is alive on the host) but cannot finish,
so a test can kill the console or cancel the job at a known moment without
sleeping, and open the gate to let it finish.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.testbed import SshdHost

TASKS = ["json_parser", "lru_cache", "regex_engine"]
SECRET = "hf_dflash_test_secret_value"  # the gpu host's HF_TOKEN: must reach jobs, never logs


@dataclass(frozen=True)
class Assets:
    teacher: Path  # the baseline drafter (quality 1.0)
    student: Path  # a weaker copy of it (quality 0.05)
    alien: Path  # a drafter of another architecture (does not fit the cache)
    cache: Path  # dflash-cache/1 matching the teacher


@pytest.fixture(scope="session")
def assets(tmp_path_factory: pytest.TempPathFactory) -> Assets:
    import torch

    from dflash_tui.evals.synthetic import write_cache, write_drafter

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("eval-assets")
    # (a tiny teacher can be degenerate: with some seeds no amount of noise changes its
    # greedy blocks; seed 2026 is not, so the student below scores clearly lower)
    teacher = write_drafter(root / "teacher", block_size=8, seed=2026)
    student = write_drafter(root / "student", teacher=teacher, quality=0.05, seed=2)
    alien = write_drafter(root / "alien", block_size=8, hidden_size=32, head_dim=8, seed=3)
    cache = write_cache(
        root / "cache", drafter_dir=teacher, n_samples=3, seq_len=40, task_names=TASKS, seed=4
    )
    return Assets(teacher, student, alien, cache)


@dataclass
class Gate:
    """A python that waits for `path` before it starts (see the module docstring)."""

    path: Path
    python: Path

    def open(self) -> None:
        self.path.touch()


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[Gate]:
    path = tmp_path / "gate-open"
    python = tmp_path / "gated-python"
    python.write_text(
        f"#!/bin/sh\nwhile [ ! -e '{path}' ]; do sleep 0.05; done\nexec '{sys.executable}' \"$@\"\n"
    )
    python.chmod(0o755)
    yield Gate(path, python)
    # A test that failed may leave jobs waiting at the gate: kill their process groups.
    waiting = subprocess.run(["pgrep", "-f", str(python)], capture_output=True, text=True)
    for pid in waiting.stdout.split():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(os.getpgid(int(pid)), signal.SIGKILL)


def place(src: Path, host: SshdHost, rel: str) -> Path:
    """Copy a local asset under a host's HOME; returns its absolute path."""
    dst = host.home / rel
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src, dst)
    return dst


@dataclass
class Cluster:
    store: SshdHost
    gpu: SshdHost
    gate: Gate
    config: Path
    paths: dict[str, Path]

    def cli(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "dflash_tui", *args, "--config", str(self.config)]


@pytest.fixture
def cluster(
    sshd_factory: Callable[..., SshdHost],
    write_config: Callable[..., Path],
    assets: Assets,
    gate: Gate,
) -> Cluster:
    """Hosts `store` and `gpu` with: zlab (baseline, on gpu), student (step 4000, on store),
    alien (on gpu, does not fit), and suite `coding` (cache on gpu)."""
    store, gpu = sshd_factory("store"), sshd_factory("gpu")
    paths = {
        "zlab": place(assets.teacher, gpu, "models/Qwen3.6-27B-DFlash"),
        "student": place(assets.student, store, "ckpts/run1/step-4000"),
        "alien": place(assets.alien, gpu, "models/alien"),
        "cache": place(assets.cache, gpu, "eval/coding"),
    }
    extra = f"""
[[checkpoints]]
name = "zlab"
host = "gpu"
path = "{paths["zlab"]}"
baseline = true

[[checkpoints]]
name = "student"
host = "store"
path = "{paths["student"]}"

[[checkpoints]]
name = "alien"
host = "gpu"
path = "{paths["alien"]}"

[[suites]]
name = "coding"
host = "gpu"
cache = "{paths["cache"]}"
"""
    gpu_table = {"python": str(gate.python), "env": {"HF_TOKEN": SECRET}}
    config = write_config({"store": store, "gpu": (gpu, gpu_table)}, extra=extra)
    return Cluster(store, gpu, gate, config, paths)


def pgroup_alive(pgid: int) -> bool:
    """Whether any process of group `pgid` exists (the sshd hosts run on this machine)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def env_without_home_ssh() -> dict[str, Any]:
    env = dict(os.environ)
    env.pop("SSH_AUTH_SOCK", None)
    return env
