"""Tiny eval assets and two real sshd hosts: `store` holds a checkpoint, `gpu` runs the evals.

Both run real (CPU) evals: suites `coding` (on gpu) and `coding-store` (on store)
say `device = "cpu"`. The gpu host also has an `nvidia-smi` that lists two GPUs
(these machines have none), for suite `coding-gpu`, whose jobs get a GPU each and
`--device cuda:0`; those tests never let the harness start.

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

    from dflash_tui.demo.synthetic import write_cache, write_drafter

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("eval-assets")
    # (a tiny teacher can be degenerate: with some seeds no amount of noise changes its
    # greedy blocks; seed 2026 is not, so the student below scores clearly lower)
    teacher = write_drafter(root / "teacher", block_size=8, seed=2026)
    student = write_drafter(root / "student", teacher=teacher, quality=0.05, seed=2)
    alien = write_drafter(root / "alien", block_size=8, hidden_size=32, head_dim=8, seed=3)
    cache = write_cache(  # a response mask (every position after the prompt), as real caches
        root / "cache",
        drafter_dir=teacher,
        n_samples=3,
        seq_len=40,
        task_names=TASKS,
        seed=4,
        anchors="all",
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


# Stands in for nvidia-smi on a host with two GPUs (only `-L` is asked for).
FAKE_NVIDIA_SMI = """#!/bin/sh
[ "$1" = -L ] || { echo "fake nvidia-smi: only -L" >&2; exit 2; }
echo "GPU 0: NVIDIA H200 (UUID: GPU-00000000-0000-0000-0000-000000000000)"
echo "GPU 1: NVIDIA H200 (UUID: GPU-11111111-1111-1111-1111-111111111111)"
"""


def two_gpus_path(host: SshdHost) -> str:
    """A PATH for `host` on which `nvidia-smi -L` lists two GPUs."""
    folder = host.root / "gpu-bin"
    folder.mkdir(parents=True, exist_ok=True)
    tool = folder / "nvidia-smi"
    tool.write_text(FAKE_NVIDIA_SMI)
    tool.chmod(0o755)
    return f"{folder}:{os.environ.get('PATH', '/usr/bin:/bin')}"


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
    alien (on gpu, does not fit), suites `coding` and `coding-gpu` (cache on gpu) and
    `coding-store` (cache on store)."""
    store, gpu = sshd_factory("store"), sshd_factory("gpu")
    paths = {
        "zlab": place(assets.teacher, gpu, "models/Qwen3.6-27B-DFlash"),
        "student": place(assets.student, store, "ckpts/run1/step-4000"),
        "alien": place(assets.alien, gpu, "models/alien"),
        "cache": place(assets.cache, gpu, "eval/coding"),
        "store_cache": place(assets.cache, store, "eval/coding"),
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
device = "cpu"

[[suites]]
name = "coding-gpu"
host = "gpu"
cache = "{paths["cache"]}"

[[suites]]
name = "coding-store"
host = "store"
cache = "{paths["store_cache"]}"
device = "cpu"
"""
    gpu_env = {"HF_TOKEN": SECRET, "PATH": two_gpus_path(gpu)}
    gpu_table = {"python": str(gate.python), "env": gpu_env}
    store_table = {"python": str(gate.python)}
    config = write_config({"store": (store, store_table), "gpu": (gpu, gpu_table)}, extra=extra)
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
