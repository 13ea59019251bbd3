"""`dflash-tui sweep RUN SUITE` on an SSH host, and `leaderboard --run RUN --json` after it."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.evals.cluster import Assets, assets, place  # noqa: F401 - the session fixture
from tests.testbed import SshdHost


def test_sweep_cli_evaluates_complete_checkpoints_once(
    sshd: SshdHost,
    write_config,
    assets: Assets,  # noqa: F811
) -> None:
    from dflash_tui.demo.synthetic import write_drafter

    for i, quality in enumerate((0.3, 0.9), start=1):
        write_drafter(
            sshd.home / "ckpt" / f"step-{i * 500}", teacher=assets.teacher, quality=quality, seed=i
        )
    half = sshd.home / "ckpt" / "step-1500"  # being written: no weights yet
    half.mkdir()
    (half / "config.json").write_text("{}")
    cache = place(assets.cache, sshd, "eval/coding")
    extra = f"""
[[runs]]
name = "r1"
host = "gpu"
log = "train.log"
checkpoints = "{sshd.home}/ckpt/step-*"

[[suites]]
name = "coding"
host = "gpu"
cache = "{cache}"
max_anchors = 8
device = "cpu"
"""
    config = write_config({"gpu": (sshd, {"python": sys.executable})}, extra=extra)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "dflash_tui", *args, "--config", str(config)]
        return subprocess.run(argv, capture_output=True, text=True, timeout=120)

    done = cli(
        "sweep", "r1", "coding", "--settle", "0.2", "--max-parallel", "2", "--wait", "--json"
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["backend"] == "ssh" and doc["array_job"] is None
    by_name = {c["name"]: c for c in doc["checkpoints"]}
    assert by_name["r1/step-500"]["state"] == by_name["r1/step-1000"]["state"] == "done"
    assert by_name["r1/step-1500"]["status"] == "incomplete"
    assert "no weight files" in by_name["r1/step-1500"]["reason"]

    again = cli("sweep", "r1", "coding", "--settle", "0.1")
    assert again.returncode == 0, again.stderr
    assert "nothing to evaluate" in again.stdout

    progress = cli("leaderboard", "coding", "--run", "r1", "--json")
    assert progress.returncode == 0, progress.stderr
    points = json.loads(progress.stdout)["metrics"]["tau_top1"]["points"]
    assert [p["step"] for p in points] == [500, 1000]
    text = cli("leaderboard", "--run", "r1")
    assert text.returncode == 0 and "r1/step-1000" in text.stdout

    bad = cli("sweep", "nope", "coding")
    assert bad.returncode == 2 and "no run 'nope'" in bad.stderr
