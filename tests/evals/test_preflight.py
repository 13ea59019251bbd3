"""The eval preflight refuses a drafter that does not fit the suite before anything is copied.

Real sshd hosts (`store` holds the checkpoints, `gpu` the suite's cache); the checks
are the harness's own rules (`shipped/harness/rules.py`) applied to headers read over SSH.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from dflash_tui import cli
from dflash_tui.evals.jobs.preflight import REFUSED
from tests.checkpoints.drafters import BIG_CONFIG, big_drafter
from tests.evals.cluster import Cluster, place


def _written_under(home: Path) -> list[str]:
    """What the console writes on a host when it evaluates there (copies, harness, jobs)."""
    cache = home / ".cache" / "dflash-tui"
    return sorted(str(p.relative_to(home)) for p in cache.rglob("*")) if cache.exists() else []


def test_a_3gib_drafter_for_another_target_is_refused_in_seconds_with_nothing_copied(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = cluster.store.home / "ckpts" / "big" / "step-100"  # written in place: still sparse
    big_drafter(path)  # hidden 5120 and 5 feature layers; the cache is 64 wide
    (path / "config.json").write_text(json.dumps(BIG_CONFIG))
    before = _written_under(cluster.gpu.home)
    config = ["--config", str(cluster.config)]
    started = time.monotonic()
    code = cli.main(["eval", f"store:{path}", "coding", "--json", *config])
    took = time.monotonic() - started
    out = json.loads(capsys.readouterr().out)
    job = out["job"]
    assert code == 2, out
    assert job["state"] == "failed" and job["error"].startswith(REFUSED)
    error = job["error"]
    assert "hidden_size: drafter config.json has 5120" in error
    assert "target_layer_ids: drafter has [1, 9, 17, 25, 33]" in error
    assert "target head" in error and "5120" in error  # lm_head is 64 wide
    assert job["summary"].startswith(f"failed: {REFUSED}: ") and "more)" in job["summary"]
    assert _written_under(cluster.gpu.home) == before == []  # no copy, no harness, no job
    print(f"preflight refusal of a 3.4 GB sparse drafter: {took:.2f} s")

    assert cli.main(["eval", f"store:{path}", "coding", *config]) == 2
    printed = capsys.readouterr()
    shown = printed.out
    assert (printed.out + printed.err).count(REFUSED) == 1  # the job's line once, not twice
    assert f"failed: {REFUSED}: " in shown
    assert "  - target_layer_ids: drafter has" in shown  # every problem, one per line


def test_a_drafter_that_fits_passes_the_preflight_and_runs(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster.gate.open()
    code = cli.main(["eval", "student", "coding", "--json", "--config", str(cluster.config)])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    assert out["job"]["state"] in ("running", "done"), out["job"]


def test_the_preflight_names_a_mismatch_the_tensors_show_but_the_config_hides(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """config.json says hidden_size 128 over 64-wide tensors: the shapes give it away."""
    import shutil

    drafter = shutil.copytree(cluster.paths["student"], tmp_path / "liar")
    cfg = json.loads((drafter / "config.json").read_text())
    cfg["hidden_size"] = 128
    (drafter / "config.json").write_text(json.dumps(cfg))
    path = place(drafter, cluster.store, "ckpts/liar")
    code = cli.main(["eval", f"store:{path}", "coding", "--json", "--config", str(cluster.config)])
    error = json.loads(capsys.readouterr().out)["job"]["error"]
    assert code == 2
    assert "hidden_size: config.json says 128, the tensors say 64" in error
    assert "hidden_size: drafter config.json has 128, " in error  # and the cache's 64
