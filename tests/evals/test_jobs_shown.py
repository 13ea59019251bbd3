"""What `dflash-tui jobs JOB` shows of a job on a CPU host: where it ran, and a command
that runs as shown when pasted into a shell on that host (real sshd, real harness)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from dflash_tui import cli
from dflash_tui.core.config_parse import load_config
from dflash_tui.remote import HostPool
from tests.evals.cluster import Cluster


async def in_a_shell(cluster: Cluster, host: str, line: str):  # type: ignore[no-untyped-def]
    """`line` as typed at a shell prompt on `host`: its login shell, from its home."""
    async with HostPool(load_config(cluster.config)) as pool:
        return await pool.run(host, ["sh", "-c", line], timeout=300, check=False)


def fields(out: str) -> dict[str, str]:
    """`key  value` lines of `jobs JOB` (up to its log)."""
    found = {}
    for line in out.split("\n\n")[0].splitlines():
        key, _, value = line.partition("  ")
        found[key.strip()] = value.strip()
    return found


def test_a_cpu_job_says_cpu_and_its_command_runs_as_shown(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster.gate.open()
    config = ["--config", str(cluster.config)]
    assert cli.main(["eval", "zlab", "coding", "--wait", "--json", *config]) == 0
    job = json.loads(capsys.readouterr().out)["job"]
    assert cli.main(["jobs", job["id"], *config]) == 0
    shown = fields(capsys.readouterr().out)
    assert shown["host"] == "gpu (cpu)", shown  # suite coding: device = "cpu", no GPU given
    command = shown["command"]
    assert "'~/" not in command and '"$HOME"/.cache/dflash-tui/' in command, command
    # Pasted into a shell on the host (its login shell, from its home), it runs: the
    # harness scores the suite again and writes the job's results file anew.
    results = Path(job["remote_dir"]) / "eval_results.json"
    results.unlink()
    ran = asyncio.run(in_a_shell(cluster, "gpu", command))
    assert ran.exit_status == 0, ran.stderr[-2000:]
    assert json.loads(results.read_text())["schema"] == "dflash-eval/1"


def test_home_paths_are_quoted_for_the_shell_to_expand() -> None:
    from dflash_tui.remote.command import HomePath, home_words, shell_join

    words = home_words(["python3", "~/.cache/x y/h", "--out=~/jobs/1/r.json", "/abs", "~user/x"])
    assert isinstance(words[1], HomePath) and words[1] == "~/.cache/x y/h"  # same text
    assert shell_join(words) == (
        "python3 \"$HOME\"/'.cache/x y/h' --out=\"$HOME\"/jobs/1/r.json /abs '~user/x'"
    )
