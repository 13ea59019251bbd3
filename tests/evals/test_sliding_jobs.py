"""`--sliding` from `[[suites]] sliding` or `dflash-tui eval --sliding` reaches the harness.

Real sshd host, real (CPU) harness; the gate holds the harness so its argv can be read.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dflash_tui import cli
from dflash_tui.commands.eval import _print
from dflash_tui.core.config import ConfigError
from dflash_tui.core.config_parse import load_config, parse_config
from dflash_tui.evals.jobs.manager import JobError, JobManager, open_eval_state
from dflash_tui.remote import HostPool
from tests.evals.cluster import Cluster

CAUSAL_SUITE = """
[[suites]]
name = "coding-causal"
host = "gpu"
cache = "{cache}"
device = "cpu"
sliding = "causal"
"""


@pytest.fixture
def config_path(cluster: Cluster) -> Path:
    """The cluster's config plus a suite whose harness runs get `--sliding causal`."""
    text = cluster.config.read_text() + CAUSAL_SUITE.format(cache=cluster.paths["cache"])
    cluster.config.write_text(text)
    return cluster.config


@pytest.fixture
async def manager(config_path: Path) -> AsyncIterator[JobManager]:
    config = load_config(config_path)
    conn = open_eval_state(config.console.state_dir)
    pool = HostPool(config)
    mgr = JobManager(config, pool, conn)
    yield mgr
    await mgr.close()
    await pool.close()
    conn.close()


def _harness_argv(pid: int) -> list[str]:
    (child,) = subprocess.run(
        ["pgrep", "-P", str(pid)], capture_output=True, text=True
    ).stdout.split()
    return [a.decode() for a in Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0") if a]


def _sliding_arg(argv: list[str]) -> str | None:
    return argv[argv.index("--sliding") + 1] if "--sliding" in argv else None


async def test_suite_and_job_sliding_reach_the_harness(
    cluster: Cluster, manager: JobManager
) -> None:
    by_suite = await manager.launch("zlab", "coding-causal")
    by_job = await manager.launch("zlab", "coding-causal", sliding="bidirectional")
    neither = await manager.launch("zlab", "coding")
    try:
        for job in (by_suite, by_job, neither):
            assert job.state == "running", job
        assert _sliding_arg(_harness_argv(by_suite.pid)) == "causal"  # type: ignore[arg-type]
        assert _sliding_arg(_harness_argv(by_job.pid)) == "bidirectional"  # type: ignore[arg-type]
        assert _sliding_arg(_harness_argv(neither.pid)) is None  # the harness's default
        assert manager.job(by_job.id).sliding == "bidirectional"  # kept in the job's row
        assert "--sliding causal" in (by_suite.command or "")
    finally:
        for job in (by_suite, by_job, neither):
            await manager.cancel(job.id)


async def test_an_unknown_sliding_is_refused(manager: JobManager) -> None:
    with pytest.raises(JobError, match="--sliding expects one of bidirectional, causal") as exc:
        await manager.start_eval("zlab", "coding", sliding="windowed")
    assert exc.value.exit_code == 2


def test_eval_sliding_is_recorded_and_shown(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster.gate.open()
    config = ["--config", str(cluster.config)]
    code = cli.main(["eval", "zlab", "coding", "--sliding", "causal", "--wait", "--json", *config])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    assert out["result"]["attention"] == "causal" and not out["result"]["attention_assumed"]
    assert out["result"]["attention_record"]["source"] == "--sliding"
    stored = Path(load_config(cluster.config).console.results_dir)
    (results,) = stored.glob("coding/zlab__*/eval_results.json")
    assert json.loads(results.read_text())["attention"]["source"] == "--sliding"
    _print(out)
    assert "scored with sliding layers causal\n" in capsys.readouterr().out


def test_eval_says_when_the_drafters_config_decided(capsys: pytest.CaptureFixture[str]) -> None:
    """What `eval` prints when the drafter's is_causal overrode --sliding (the record as the
    harness writes it, see tests/harness/test_harness_attention.py)."""
    record = {"sliding": "bidirectional", "full": "bidirectional", "requested": "causal",
              "source": "config.json is_causal", "sliding_layers": 2}  # fmt: skip
    job = {"id": "j", "summary": "done", "state": "done", "log_tail": []}
    result = {"metrics": {}, "ratios": {}, "baseline": False, "attention": "bidirectional",
              "attention_assumed": False, "attention_record": record}  # fmt: skip
    _print({"job": job, "result": result})
    assert (
        "scored with sliding layers bidirectional (config.json is_causal; --sliding causal was "
        "not applied)" in capsys.readouterr().out
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            '"windowed"',
            "suites[0].sliding: must be one of 'bidirectional', 'causal', got 'windowed'",
        ),
        ("1", "suites[0].sliding: expected a string, got an integer 1"),
    ],
)
def test_suite_sliding_is_validated_with_file_line_and_key(
    tmp_path: Path, value: str, message: str
) -> None:
    text = f'[hosts.a]\naddress = "h"\n[[suites]]\nname = "s"\nhost = "a"\ncache = "/c"\nsliding = {value}\n'
    path = tmp_path / "hosts.toml"
    with pytest.raises(ConfigError) as exc:
        parse_config(text, path)
    shown = str(exc.value)
    assert message in shown and f"{path}:7" in shown, shown
    ok = parse_config(text.replace(f"sliding = {value}", 'sliding = "causal"'), path)
    assert ok.suites[0].sliding == "causal"
