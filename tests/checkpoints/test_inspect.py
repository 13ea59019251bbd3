"""`inspect` reads only safetensors headers and config.json, locally and over real sshd."""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path

import pytest

from dflash_tui.checkpoints import CheckpointError, compare, inspect_local, inspect_remote
from dflash_tui.core.config_parse import load_config
from dflash_tui.remote import HostPool
from tests.checkpoints.drafters import DRAFTER_CONFIG, big_drafter, write_safetensors


def rchar(io_text: str) -> int:
    """Bytes a process (and the children it reaped) read, from /proc/PID/io."""
    return int(next(line for line in io_text.splitlines() if line.startswith("rchar:")).split()[1])


# An exec_prefix for the sshd host: runs the command, then saves its own /proc/$$/io,
# which counts everything its children (the inspect script and its tools) read.
IO_WRAPPER = """#!/bin/sh
out=$1
shift
"$@"
rc=$?
cat "/proc/$$/io" > "$out"
exit $rc
"""


def test_local_summary_of_a_multi_gb_sparse_checkpoint(tmp_path: Path) -> None:
    header_bytes = big_drafter(tmp_path / "ckpt")
    before = rchar(Path("/proc/self/io").read_text())
    summary = inspect_local(str(tmp_path / "ckpt"))
    read = rchar(Path("/proc/self/io").read_text()) - before
    # Measured by the kernel, not by the code under test: no weight bytes were read.
    assert read < header_bytes + 64 * 1024, read
    assert summary.kind == "drafter"
    assert summary.weight_bytes > 3_000_000_000
    assert summary.parameters == (summary.weight_bytes - header_bytes) // 2
    assert summary.layers == 5 and summary.setting("block_size") == 16
    assert summary.dtypes == {"BF16": summary.parameters}
    assert summary.bytes_read == header_bytes + len(
        (tmp_path / "ckpt" / "config.json").read_bytes()
    )


async def test_remote_inspect_reads_only_headers_and_is_fast(
    sshd, write_config, tmp_path: Path
) -> None:
    header_bytes = big_drafter(tmp_path / "my ckpt; $x")
    wrapper, io_file = tmp_path / "io-wrapper", tmp_path / "remote.io"
    wrapper.write_text(IO_WRAPPER)
    wrapper.chmod(0o755)
    config = load_config(write_config({"a": (sshd, {"exec_prefix": [str(wrapper), str(io_file)]})}))
    async with HostPool(config) as pool:
        await pool.connect("a")
        started = time.monotonic()
        summary = await inspect_remote(pool, "a", str(tmp_path / "my ckpt; $x"))
        elapsed = time.monotonic() - started
    assert elapsed < 1.0
    assert summary.weight_bytes > 3_000_000_000
    assert summary.config_sha256 is not None
    # What crossed the network: the config, the header, and a few framing lines.
    assert summary.bytes_read < header_bytes + len(json.dumps(DRAFTER_CONFIG)) + 200
    # What was read on the host, as its kernel counts it: the header (read twice, through
    # head and tail), the config and the tools' own start-up, never the 3.4 GB of weights.
    read_on_host = rchar(io_file.read_text())
    assert read_on_host < 2 * header_bytes + 256 * 1024, read_on_host


async def test_sharded_checkpoint_sha256_and_comparison(sshd, write_config, tmp_path: Path) -> None:
    for name in ("a", "b"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(DRAFTER_CONFIG))
        write_safetensors(
            folder / "model-00001-of-00002.safetensors",
            {"fc.weight": ("F32", [4, 8])},
            sparse=False,
        )
        write_safetensors(
            folder / "model-00002-of-00002.safetensors", {"norm.weight": ("F32", [4])}, sparse=False
        )
        index = {
            "weight_map": {
                "fc.weight": "model-00001-of-00002.safetensors",
                "norm.weight": "model-00002-of-00002.safetensors",
            }
        }
        (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    config = load_config(write_config({"h": sshd}))
    async with HostPool(config) as pool:
        a = await inspect_remote(pool, "h", str(tmp_path / "a"), sha256=True)
        b = await inspect_remote(pool, "h", str(tmp_path / "b"), sha256=True)
    assert [f.name for f in a.files] == [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ]
    assert all(f.sha256 and len(f.sha256) == 64 for f in a.files)
    result = compare(a, b)
    assert result.same_shapes and result.same_bytes is False  # random data differs
    assert compare(a, a).same_bytes is True


def test_drafter_against_target_config(tmp_path: Path) -> None:
    big_drafter(tmp_path / "d")
    target = tmp_path / "t"
    target.mkdir()
    (target / "config.json").write_text(
        json.dumps({"hidden_size": 5120, "num_hidden_layers": 48, "vocab_size": 151936})
    )
    write_safetensors(
        target / "model.safetensors", {"model.embed_tokens.weight": ("BF16", [151936, 5120])}
    )
    result = compare(inspect_local(str(tmp_path / "d")), inspect_local(str(target)))
    assert result.kind == "drafter-vs-target" and not result.compatible
    assert any("target_layer_ids [61]" in d for d in result.differences)
    assert any("mask_token_id 248070" in d for d in result.differences)


def _multimodal_target(folder: Path, text_config: dict[str, int], key: str) -> None:
    """A Qwen3.6-27B-like target: the language model's sizes under `text_config`."""
    folder.mkdir()
    config = {
        "architectures": ["Qwen3_5ForConditionalGeneration"],
        "model_type": "qwen3_5",
        key: {"model_type": "qwen3_5_text", **text_config},
        "vision_config": {"hidden_size": 1152, "depth": 27},
    }
    (folder / "config.json").write_text(json.dumps(config))
    write_safetensors(
        folder / "model.safetensors",
        {"model.language_model.embed_tokens.weight": ("BF16", [248320, 5120])},
    )


@pytest.mark.parametrize("key", ["text_config", "language_config"])
def test_drafter_against_a_multimodal_target_reads_its_text_config(
    tmp_path: Path, key: str
) -> None:
    big_drafter(tmp_path / "d")
    sizes = {"hidden_size": 5120, "num_hidden_layers": 64, "vocab_size": 248320}
    _multimodal_target(tmp_path / "t", sizes, key)
    target = inspect_local(str(tmp_path / "t"))
    assert target.kind == "target" and target.layers == 64
    result = compare(inspect_local(str(tmp_path / "d")), target)
    assert result.kind == "drafter-vs-target"
    assert result.compatible and result.differences == () and result.unchecked == ()

    # The same checks still catch a real mismatch inside the nested table.
    _multimodal_target(tmp_path / "t2", {**sizes, "num_hidden_layers": 48}, key)
    bad = compare(inspect_local(str(tmp_path / "d")), inspect_local(str(tmp_path / "t2")))
    assert not bad.compatible
    assert any(f"[61] outside the target's 48 layers ({key}" in d for d in bad.differences)


def test_a_value_missing_from_the_target_is_said_not_skipped(tmp_path: Path) -> None:
    import subprocess
    import sys

    big_drafter(tmp_path / "d")
    _multimodal_target(
        tmp_path / "t", {"hidden_size": 5120, "num_hidden_layers": 64}, "text_config"
    )
    result = compare(inspect_local(str(tmp_path / "d")), inspect_local(str(tmp_path / "t")))
    assert result.compatible and result.differences == ()
    (line,) = result.unchecked
    assert "mask token: not checked" in line and "has no vocab_size" in line
    assert "text_config, language_config" in line
    out = subprocess.run(
        [sys.executable, "-m", "dflash_tui", "inspect", str(tmp_path / "d"), "--against",
         str(tmp_path / "t")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "compatible (1 check(s) could not be made" in out.stdout
    assert "has no vocab_size" in out.stdout


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"\x01\x00\x00",
        struct.pack("<Q", 1 << 40) + b"{}",
        struct.pack("<Q", 50) + b"{not json",
    ],
)
def test_bad_weight_files_give_a_clear_error(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "model.safetensors").write_bytes(content)
    with pytest.raises(CheckpointError, match=r"model\.safetensors"):
        inspect_local(str(tmp_path))


async def test_remote_missing_path_is_named(sshd, write_config, tmp_path: Path) -> None:
    config = load_config(write_config({"a": sshd}))
    async with HostPool(config) as pool:
        with pytest.raises(CheckpointError, match=r"a:.*/nope: no such file or directory"):
            await inspect_remote(pool, "a", str(tmp_path / "nope"))


async def test_locate_finds_copies_across_hosts_and_groups_identical_ones(
    sshd_factory, write_config, tmp_path: Path
) -> None:
    a, b = sshd_factory("ha"), sshd_factory("hb")
    for root, data in ((a.home / "models", b"same"), (b.home / "models", b"same")):
        ckpt = root / "Qwen3.6-27B-DFlash"
        ckpt.mkdir(parents=True)
        (ckpt / "config.json").write_text(json.dumps(DRAFTER_CONFIG))
        (ckpt / "model.safetensors").write_bytes(data)
    other = b.home / "models" / "qwen3.6-27b-dflash-step4000"
    other.mkdir()
    (other / "config.json").write_text("{}")
    config = load_config(
        write_config(
            {
                "ha": (a, {"model_roots": [str(a.home / "models")]}),
                "hb": (b, {"model_roots": [str(b.home / "models"), "/nonexistent"]}),
            }
        )
    )
    from dflash_tui.checkpoints import locate

    async with HostPool(config) as pool:
        found, errors = await locate(pool, "qwen3.6-27b-dflash")
    assert errors == {}
    by_path = {(f.host, Path(f.path).name): f for f in found}
    assert set(by_path) == {
        ("ha", "Qwen3.6-27B-DFlash"),
        ("hb", "Qwen3.6-27B-DFlash"),
        ("hb", "qwen3.6-27b-dflash-step4000"),
    }
    assert (
        by_path["ha", "Qwen3.6-27B-DFlash"].copy_group
        == by_path["hb", "Qwen3.6-27B-DFlash"].copy_group
    )
    assert (
        by_path["hb", "qwen3.6-27b-dflash-step4000"].copy_group
        != by_path["ha", "Qwen3.6-27B-DFlash"].copy_group
    )
    assert by_path["ha", "Qwen3.6-27B-DFlash"].size_bytes > 0


def test_inspect_cli_json_and_exit_codes(tmp_path: Path) -> None:
    import subprocess
    import sys

    big_drafter(tmp_path / "d")
    out = subprocess.run(
        [sys.executable, "-m", "dflash_tui", "inspect", str(tmp_path / "d"), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["kind"] == "drafter" and data["block_size"] == 16 and data["layers"] == 5
    missing = subprocess.run(
        [sys.executable, "-m", "dflash_tui", "inspect", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        missing.returncode == 1
        and "no such file or directory" in missing.stderr
        and "Traceback" not in missing.stderr
    )
