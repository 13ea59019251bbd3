"""Configs the harness would score wrongly are refused, one line per field; torch stays quiet.

The DFlash 2 fields are those of z-lab/dflash's DFlash2DraftModel config
(``dflash_config.conv_kernel_size``, ``conv_group_size``, ``selector_rank``,
``selector_top_k``, ``architectures: ["DFlash2DraftModel"]``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from harness_helpers import copy_pair, run_cli

import dflash_tui.shipped.harness as harness_pkg
from dflash_tui.shipped.harness.refusals import unsupported_fields

NESTED = "dflash_config"
CASES = {
    "dflash2_architecture": ({"architectures": ["DFlash2DraftModel"]}, "architectures: "),
    "conv_kernel_size": ({NESTED: {"conv_kernel_size": 2}}, "dflash_config.conv_kernel_size: a DFlash 2 field"),
    "conv_group_size": ({NESTED: {"conv_group_size": 16}}, "dflash_config.conv_group_size: a DFlash 2 field"),
    "selector_rank": ({NESTED: {"selector_rank": 256}}, "dflash_config.selector_rank: a DFlash 2 field"),
    "selector_top_k": ({NESTED: {"selector_top_k": 16}}, "dflash_config.selector_top_k: a DFlash 2 field"),
    "attention_bias": ({"attention_bias": True}, "attention_bias: True"),
    "rope_scaling": (
        {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}},
        "rope_scaling: {'rope_type': 'yarn', 'factor': 4.0}: scaled RoPE is not implemented",
    ),
    "rope_parameters": (
        {"rope_parameters": {"rope_type": "llama3", "rope_theta": 5e5}},
        "rope_parameters.rope_type: 'llama3'",
    ),
    "model_type": ({"model_type": "llama"}, "model_type: 'llama' is not a drafter architecture"),
    "attention_sink_bias": ({NESTED: {"attention_sink_bias": True}}, "dflash_config.attention_sink_bias"),
    "use_swa": ({NESTED: {"use_swa": True}}, "dflash_config.use_swa"),
    "is_neox_style": ({"is_neox_style": False}, "is_neox_style: false"),
}  # fmt: skip


def _edit(path: Path, changes: dict) -> None:
    raw = json.loads(path.read_text())
    for key, value in changes.items():
        if key == NESTED:
            raw[NESTED] = {**raw.get(NESTED, {}), **value}
        else:
            raw[key] = value
    path.write_text(json.dumps(raw))


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_field_is_refused_by_name(capsys, small, tmp_path, case):
    changes, named = CASES[case]
    pair = copy_pair(small, tmp_path)
    _edit(pair.drafter / "config.json", changes)
    result = run_cli(capsys, pair, tmp_path / "r.json")
    assert result.code == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("  - ")]
    assert len(lines) == 1 and named in lines[0], result.stderr  # one line, naming the field
    assert not (tmp_path / "r.json").exists()


def test_a_whole_dflash2_config_names_every_field():
    raw = {
        "architectures": ["DFlash2DraftModel"],
        "attention_bias": False,
        "is_causal": False,
        "model_type": "qwen3",
        "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"},
        NESTED: {"conv_group_size": 16, "conv_kernel_size": 2, "selector_rank": 256, "selector_top_k": 16},
    }  # fmt: skip
    lines = unsupported_fields(raw)
    assert len(lines) == 5
    for field in (
        "architectures",
        "conv_group_size",
        "conv_kernel_size",
        "selector_rank",
        "selector_top_k",
    ):
        assert sum(field in line for line in lines) == 1, field


def test_plain_configs_are_not_refused():
    assert unsupported_fields({"model_type": "qwen3", "attention_bias": False}) == []
    assert (
        unsupported_fields({"rope_scaling": None, "rope_parameters": {"rope_type": "default"}})
        == []
    )


def test_no_numpy_warning_on_a_harness_run(small, tmp_path):
    """torch without numpy warns "Failed to initialize NumPy" at import; the harness silences it.

    numpy is hidden from the child by a package of that name that fails to import,
    which is what torch sees on a host without numpy.
    """
    shadow = tmp_path / "shadow" / "numpy"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'numpy'\")\n")
    src = Path(harness_pkg.__file__).parents[3]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS",)}
    env["PYTHONPATH"] = os.pathsep.join([str(shadow.parent), str(src)])
    probe = subprocess.run(
        [sys.executable, "-c", "import torch"], env=env, capture_output=True, text=True, timeout=120
    )
    assert "Failed to initialize NumPy" in probe.stderr  # the condition is real in the child
    proc = subprocess.run(
        [sys.executable, "-m", "dflash_tui.shipped.harness", "--drafter", str(small.drafter),
         "--cache", str(small.cache), "--out", str(tmp_path / "r.json"), "--device", "cpu",
         "--max-anchors", "2"],
        env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr
