"""What `dflash-tui inspect` prints (run as a real process on local checkpoints): sizes in
binary units, parameters as a count, and whether two checkpoints hold the same bytes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.checkpoints.drafters import DRAFTER_CONFIG, write_safetensors

SMALL = {  # 82,368 parameters in F32: the demo drafter's size
    "fc.weight": ("F32", [64, 1280]),
    "norm.weight": ("F32", [64]),
    "layers.0.mlp.up_proj.weight": ("F32", [96, 4]),
}


def inspect(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dflash_tui", "inspect", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def small_drafter(folder: Path, config: dict | None = None) -> Path:  # type: ignore[type-arg]
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config or DRAFTER_CONFIG))
    write_safetensors(folder / "model.safetensors", SMALL, sparse=False)
    return folder


def field(out: str, name: str) -> str:
    """The value of the `name` line of a summary (the first one)."""
    for line in out.splitlines():
        if line.startswith(name + "  "):
            return line[len(name) :].strip()
    raise AssertionError(f"no {name!r} line in:\n{out}")


def test_parameters_are_a_count_and_weights_a_binary_size(tmp_path: Path) -> None:
    out = inspect(str(small_drafter(tmp_path / "d")))
    assert out.returncode in (0, 1), out.stderr
    assert field(out.stdout, "parameters") == "82,368 (82.4 K)"
    size = (tmp_path / "d" / "model.safetensors").stat().st_size  # 329,472 + its header
    assert 329_472 < size < 331_776  # so it is 322..324 KiB
    assert field(out.stdout, "weights") in {"322 KiB in 1 file", "323 KiB in 1 file"}


def test_same_bytes_is_no_when_the_configs_differ(tmp_path: Path) -> None:
    # Same tensors, shapes and weight sizes; only config.json differs (its sha256 is known
    # from inspecting alone, no --sha256 needed to tell the bytes are not the same).
    a = small_drafter(tmp_path / "a")
    b = small_drafter(tmp_path / "b", {**DRAFTER_CONFIG, "vocab_size": 1000})
    out = inspect(str(a), "--against", str(b))
    assert field(out.stdout, "config sha256") != out.stdout.split("config sha256")[2].split()[0]
    assert "same bytes: no (config.json differs)" in out.stdout, out.stdout
    data = json.loads(inspect(str(a), "--against", str(b), "--json").stdout)["comparison"]
    assert data["same_bytes"] is False and data["bytes_differ"] == ["config.json"]


def test_same_bytes_stays_unknown_without_hashes_when_only_weights_could_differ(
    tmp_path: Path,
) -> None:
    a = small_drafter(tmp_path / "a")
    b = small_drafter(tmp_path / "b")  # same config bytes, weights of the same size
    out = inspect(str(a), "--against", str(b))
    assert "same bytes: unknown (use --sha256)" in out.stdout, out.stdout
    hashed = inspect(str(a), "--against", str(b), "--sha256")
    assert "same bytes: no (model.safetensors differs)" in hashed.stdout, hashed.stdout
    same = inspect(str(a), "--against", str(a), "--sha256")
    assert "same bytes: yes" in same.stdout, same.stdout
