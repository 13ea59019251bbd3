"""`dflash-tui cache build` on a real sshd host: the builder and the prompts are uploaded, the
build runs detached like an eval job, with its progress, and lands in the suite's cache path
exactly as the builder writes it locally; bad requests are refused before anything runs."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from dflash_tui.shipped.cachebuild import cli as cachebuild_cli
from tests.cachebuild import field_rows as F
from tests.testbed import SshdHost

PROMPTS = [
    {"name": "chat", "prompt": "w3 w1 w4 w1 w5"},
    {"name": "ids", "input_ids": [9, 2, 6, 5, 3]},
]


@pytest.fixture
def bed(
    sshd_factory: Callable[..., SshdHost], write_config: Callable[..., Path], tmp_path: Path
) -> dict[str, Path]:
    from dflash_tui.demo.synthetic import write_drafter
    from dflash_tui.demo.synthetic_target import write_target

    torch.set_num_threads(1)
    gpu, other = sshd_factory("gpu"), sshd_factory("other")
    target = write_target(gpu.home / "models" / "tiny-qwen3", seed=5)
    drafter = write_drafter(
        gpu.home / "models" / "drafter", vocab_size=64, target_layer_ids=(1, 3), block_size=4
    )
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    cache = gpu.home / "eval" / "built"
    extra = f"""
[[suites]]
name = "mt-bench"
host = "gpu"
cache = "{gpu.home / "eval" / "mt-bench"}"
device = "cpu"

[[checkpoints]]
name = "drafter"
host = "gpu"
path = "{drafter}"

[[suites]]
name = "built"
host = "gpu"
cache = "{cache}"
device = "cpu"
"""
    python = {"python": sys.executable}  # (a fresh sshd session: no PYTHONPATH; the builder
    # runs as the uploaded directory, like the harness)
    config = write_config({"gpu": (gpu, python), "other": (other, python)}, extra=extra)
    return {
        "config": config,
        "target": target,
        "prompts": prompts,
        "cache": cache,
        "tmp": tmp_path,
        "data": gpu.home / "data",
    }


def dflash(bed: dict[str, Path], *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "dflash_tui", *args, "--config", str(bed["config"])]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


def test_cache_build_runs_detached_on_the_suites_host(bed: dict[str, Path]) -> None:
    build = [
        "cache",
        "build",
        "built",
        "--target",
        f"gpu:{bed['target']}",
        "--prompts",
        str(bed["prompts"]),
        "--drafter",
        "gpu:" + str(bed["target"].parent / "drafter"),  # its target_layer_ids: 1,3
        "--max-new-tokens",
        "10",
    ]
    out = dflash(bed, *build, "--wait", "--json")
    assert out.returncode == 0, out.stderr + out.stdout
    job = json.loads(out.stdout)["job"]
    assert job["state"] == "done" and job["kind"] == "cache", job
    assert (job["progress_done"], job["progress_total"]) == (2, 2)
    assert job["result_dir"] == f"gpu:{bed['cache']}"
    assert job["checkpoint"] == "target:tiny-qwen3"
    assert "/.cache/dflash-tui/cachebuild/" in job["command"]

    # The same cache as the builder makes here, from the same target and prompts.
    local = bed["tmp"] / "local-cache"
    args = ["--target", str(bed["target"]), "--prompts", str(bed["prompts"]), "--out", str(local)]
    args += ["--target-layer-ids", "1,3", "--max-new-tokens", "10", "--device", "cpu"]
    assert cachebuild_cli.main(args) == 0
    remote = json.loads((bed["cache"] / "manifest.json").read_text())
    assert remote["target_layer_ids"] == [1, 3]
    for entry in remote["samples"]:
        a, b = load_file(str(bed["cache"] / entry["file"])), load_file(str(local / entry["file"]))
        assert all(torch.equal(a[k], b[k]) for k in ("input_ids", "hidden_states", "loss_mask"))

    # Listed with the eval jobs; `collect` finds no eval results in it.
    listed = json.loads(dflash(bed, "jobs", "--json").stdout)["jobs"]
    assert [j["id"] for j in listed if j["kind"] == "cache"] == [job["id"]]
    collected = json.loads(dflash(bed, "collect", "--json").stdout)
    assert collected["stored"] == [] and collected["rejected"] == [], collected
    # (resuming an interrupted build: tests/cachebuild; evaluating a built cache: the
    # speculative-decoding test in tests/harness)


def test_bad_cache_builds_are_refused_before_anything_runs(bed: dict[str, Path]) -> None:
    good = {
        "--target": f"gpu:{bed['target']}",
        "--prompts": str(bed["prompts"]),
        "--drafter": "gpu:" + str(bed["target"].parent / "drafter"),
    }
    for change, words in [
        ({"--target": "other:/models/x"}, "must be on gpu"),
        ({"--target": "gpu:/nowhere"}, "no config.json there"),
        ({"--target-layer-ids": "1,2"}, "differs from the drafter's"),
        ({"--prompts": "missing.jsonl"}, "cannot read it"),
    ]:
        opts = {**good, **change}
        out = dflash(bed, "cache", "build", "built", *[x for kv in opts.items() for x in kv])
        assert out.returncode == 2, (change, out.stderr)
        assert words in out.stderr, (change, out.stderr)
    assert json.loads(dflash(bed, "jobs", "--json").stdout)["jobs"] == []


def test_dataset_builds_read_the_rows_on_the_host_and_record_the_protocol(
    bed: dict[str, Path],
) -> None:
    """GSM8K from the hub's parquet file, MT-Bench from a datasets save_to_disk folder, both
    on the build host: nothing is uploaded but the builder (docs/evals.md "The protocol")."""
    bed["data"].mkdir()
    gsm8k = F.write_parquet(bed["data"] / "test-00000-of-00001.parquet", "gsm8k", F.GSM8K)
    mt = F.write_saved(bed["data"] / "mt_bench_prompts", "mt-bench", F.MT_BENCH, "train")
    common = ["--target", f"gpu:{bed['target']}", "--target-layer-ids", "1,3"]
    common += ["--max-new-tokens", "6", "--wait", "--json"]
    runs = {
        "built": ["--dataset", "gsm8k", "--data", f"gpu:{gsm8k}", "--max-samples", "3"],
        "mt-bench": ["--dataset", "mt-bench", "--data", str(mt), "--num-prompts", "2"],
    }
    for suite, flags in runs.items():
        out = dflash(bed, "cache", "build", suite, *common, *flags)
        assert out.returncode == 0, out.stderr + out.stdout
        job = json.loads(out.stdout)["job"]
        assert job["state"] == "done" and "--dataset" in job["command"], job
    built = json.loads((bed["cache"] / "manifest.json").read_text())["protocol"]
    assert (built["dataset"], built["rows"], built["sample_ids"]) == ("gsm8k", 4, [2, 0, 1])
    assert built["selection"] == {"way": "shuffle", "seed": 0, "max_samples": 3}
    assert built["source"] == {"data": str(gsm8k)} and built["max_new_tokens"] == 6
    mt_cache = bed["cache"].parent / "mt-bench"
    mt_protocol = json.loads((mt_cache / "manifest.json").read_text())["protocol"]
    assert mt_protocol["selection"] == {"way": "first", "num_prompts": 2}
    assert mt_protocol["sample_ids"] == [81, 82] and mt_protocol["thinking"] is False


def test_bad_dataset_builds_are_refused_before_anything_runs(bed: dict[str, Path]) -> None:
    base = ["cache", "build", "built", "--target", f"gpu:{bed['target']}"]
    base += ["--target-layer-ids", "1,3"]
    for flags, words in [
        (["--prompts", str(bed["prompts"]), "--thinking"], "--thinking: only with --dataset"),
        (["--dataset", "gsm8k", "--data", "other:/x.parquet"], "the rows are read on gpu"),
        (["--dataset", "gsm8k", "--data", "/nowhere/x.parquet"], "no such file or folder there"),
        (["--dataset", "gsm8k", "--data", "x.parquet"], "give the absolute path on gpu"),
        (["--dataset", "gsm8k", "--num-prompts", "0"], "--num-prompts must be positive"),
    ]:
        out = dflash(bed, *base, *flags)
        assert out.returncode == 2, (flags, out.stderr)
        assert words in out.stderr, (flags, out.stderr)
    assert json.loads(dflash(bed, "jobs", "--json").stdout)["jobs"] == []
