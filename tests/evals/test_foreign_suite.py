"""`dflash-tui eval` on a suite whose cache is SpecForge's, with `[[suites]] target`.

A real sshd host holds the drafter, a dflash-cache/1 suite, the same samples as a
SpecForge offline cache, and a sharded target model directory for its head; both
suites are evaluated through the CLI and score the same.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from safetensors import safe_open

from dflash_tui.demo.synthetic import save_safetensors
from tests.evals.cluster import Assets, place
from tests.harness.foreign_layouts import read_samples, write_specforge, write_speculators
from tests.testbed import SshdHost


def _write_target(out: Path, cache: Path) -> Path:
    """A target model directory in the transformers layout: two shards, an index, config.json."""
    manifest = json.loads((cache / "manifest.json").read_text())
    with safe_open(str(cache / manifest.get("head", "target_head.safetensors")), "pt") as f:
        embed, lm_head = f.get_tensor("embed_tokens"), f.get_tensor("lm_head")
    shards = {
        "model-00001-of-00002.safetensors": {"model.embed_tokens.weight": embed},
        "model-00002-of-00002.safetensors": {
            "lm_head.weight": lm_head,
            "model.norm.weight": embed[0].clone(),
        },
    }
    weight_map = {}
    for name, tensors in shards.items():
        save_safetensors(out / name, tensors)
        weight_map.update(dict.fromkeys(tensors, name))
    (out / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map})
    )
    (out / "config.json").write_text(
        json.dumps({"model_type": "qwen3", "num_hidden_layers": 4, "tie_word_embeddings": False})
    )
    return out


def test_eval_on_a_specforge_suite_scores_like_the_dflash_cache(
    sshd_factory: Callable[..., SshdHost],
    write_config: Callable[..., Path],
    assets: Assets,
    tmp_path: Path,
) -> None:
    gpu = sshd_factory("gpu")
    manifest, samples, _ = read_samples(assets.cache)
    local = tmp_path / "assets"
    paths = {
        "zlab": place(assets.teacher, gpu, "models/zlab"),
        "cache": place(assets.cache, gpu, "eval/coding"),
        "specforge": place(write_specforge(samples, local / "sf", compress=True), gpu, "eval/sf"),
        "target": place(_write_target(local / "target", assets.cache), gpu, "models/target"),
        # speculators: the two feature layers, then the last layer launch_vllm.py appends
        "speculators": place(
            write_speculators(
                samples, local / "spec", hidden=manifest["hidden_size"], order=[0, 1]
            ),
            gpu,
            "eval/spec",
        ),
    }
    extra = f"""
[[checkpoints]]
name = "zlab"
host = "gpu"
path = "{paths["zlab"]}"
baseline = true

[[suites]]
name = "coding"
host = "gpu"
cache = "{paths["cache"]}"
device = "cpu"

[[suites]]
name = "coding-sf"
host = "gpu"
cache = "{paths["specforge"]}"
target = "gpu:{paths["target"]}"
cache_layer_ids = [1, 3]
device = "cpu"

[[suites]]
name = "coding-spec"
host = "gpu"
cache = "{paths["speculators"]}"
target = "gpu:{paths["target"]}"
cache_layer_ids = [2, 4, 6]
device = "cpu"

[[suites]]
name = "coding-spec-two-ids"
host = "gpu"
cache = "{paths["speculators"]}"
target = "gpu:{paths["target"]}"
cache_layer_ids = [2, 4]
device = "cpu"

[[suites]]
name = "coding-sf-lost-target"
host = "gpu"
cache = "{paths["specforge"]}"
target = "gpu:{gpu.home}/models/gone"
cache_layer_ids = [1, 3]
device = "cpu"
"""
    config = write_config({"gpu": (gpu, {"python": sys.executable})}, extra=extra)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "dflash_tui", *args, "--config", str(config)]
        return subprocess.run(argv, capture_output=True, text=True, timeout=180)

    results = {}
    for suite in ("coding", "coding-sf", "coding-spec"):
        out = cli("eval", "zlab", suite, "--wait")
        assert out.returncode == 0, out.stdout + out.stderr
        (found,) = (config.parent / "results" / suite).glob("zlab__*/eval_results.json")
        results[suite] = json.loads(found.read_text())
    sf, spec, base = results["coding-sf"], results["coding-spec"], results["coding"]
    assert sf["n_anchors"] == spec["n_anchors"] == base["n_anchors"] > 0
    assert sf["metrics"] == spec["metrics"] == base["metrics"]
    assert list(sf["tasks"]) == [f"data_{i}" for i in range(len(samples))]
    assert list(spec["tasks"]) == [f"hs_{i}" for i in range(len(samples))]
    assert list(sf["tasks"].values()) == list(spec["tasks"].values())
    assert list(sf["tasks"].values()) == list(base["tasks"].values())

    # A suite naming two layers of a cache that holds three per token is refused by the
    # preflight, from the first sample's header, before a job exists on the host.
    jobs_dir = gpu.home / ".cache" / "dflash-tui" / "jobs"
    jobs_before = sorted(jobs_dir.iterdir())
    out = cli("eval", "zlab", "coding-spec-two-ids", "--wait")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "refused before copying anything" in out.stdout + out.stderr
    assert "holds 3 layers per token, the suite's cache_layer_ids name 2" in out.stdout + out.stderr
    assert sorted(jobs_dir.iterdir()) == jobs_before

    # A target that is not on the host is caught before anything starts there.
    out = cli("eval", "zlab", "coding-sf-lost-target", "--wait")
    assert out.returncode != 0
    assert f"gpu:{gpu.home}/models/gone: no target model there" in out.stdout + out.stderr
