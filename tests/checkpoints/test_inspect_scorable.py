"""`inspect` says which config fields the eval harness will refuse to score (its own check)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from dflash_tui.checkpoints import inspect_local
from tests.checkpoints.drafters import DRAFTER_CONFIG, big_drafter


def test_inspect_names_the_fields_the_harness_refuses(tmp_path: Path) -> None:
    big_drafter(tmp_path / "plain")
    assert inspect_local(str(tmp_path / "plain")).unscorable == []

    big_drafter(tmp_path / "v2")
    config = {
        **DRAFTER_CONFIG,
        "attention_bias": True,
        "dflash_config": {**DRAFTER_CONFIG["dflash_config"], "conv_kernel_size": 2},
    }
    (tmp_path / "v2" / "config.json").write_text(json.dumps(config))
    summary = inspect_local(str(tmp_path / "v2"))
    assert len(summary.unscorable) == 2
    assert summary.unscorable[0].startswith("dflash_config.conv_kernel_size: a DFlash 2 field")
    assert summary.unscorable[1].startswith("attention_bias: True")

    out = subprocess.run(
        [sys.executable, "-m", "dflash_tui", "inspect", str(tmp_path / "v2")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stdout.splitlines() if line.startswith("NOT SCORABLE")]
    assert len(lines) == 2 and "conv_kernel_size" in lines[0] and "attention_bias" in lines[1]
    data = json.loads(
        subprocess.run(
            [sys.executable, "-m", "dflash_tui", "inspect", str(tmp_path / "v2"), "--json"],
            capture_output=True, text=True, timeout=60,
        ).stdout
    )  # fmt: skip
    assert data["unscorable"] == summary.unscorable


def test_an_eval_of_an_unscorable_drafter_stops_before_the_relay(tmp_path: Path) -> None:
    import pytest

    from dflash_tui.evals.jobs.placement import PlacementError, check_drafter

    big_drafter(tmp_path / "d")
    check_drafter(inspect_local(str(tmp_path / "d")))  # a plain drafter passes
    config = {**DRAFTER_CONFIG, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}
    (tmp_path / "d" / "config.json").write_text(json.dumps(config))
    with pytest.raises(
        PlacementError, match="the eval harness cannot score this drafter: rope_scaling"
    ):
        check_drafter(inspect_local(str(tmp_path / "d")))


def test_inspect_checks_the_config_against_the_tensor_shapes(tmp_path: Path) -> None:
    """config.json says hidden_size 128 and 8 heads over 64-wide tensors with 4 heads: one
    PROBLEM line per field (not one per tensor), exit 1; the harness's own rules."""
    from dflash_tui.demo.synthetic import write_drafter

    drafter = write_drafter(tmp_path / "d")
    assert inspect_local(str(drafter)).problems == ()
    config = json.loads((drafter / "config.json").read_text())
    (drafter / "config.json").write_text(
        json.dumps({**config, "hidden_size": 128, "num_attention_heads": 8})
    )
    out = subprocess.run(
        [sys.executable, "-m", "dflash_tui", "inspect", str(drafter)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 1, out.stdout + out.stderr
    problems = [line for line in out.stdout.splitlines() if line.startswith("PROBLEM")]
    assert any("hidden_size: config.json says 128, the tensors say 64" in p for p in problems)
    assert any("num_attention_heads: config.json says 8, the tensors say 4" in p for p in problems)
    assert len(problems) == 2, problems
