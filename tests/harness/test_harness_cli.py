"""The command line: results file, event stream, options, out-of-memory retry, copied directory."""

from __future__ import annotations

import ast
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import torch
from harness_helpers import run_cli

import dflash_tui.shipped.harness as harness_pkg
from dflash_tui.evals.jobs.install import harness_tar
from dflash_tui.shipped.harness import run as run_mod

HARNESS_DIR = Path(harness_pkg.__file__).parent


def test_results_file_follows_the_schema(capsys, pairs, tmp_path):
    pair = pairs["sliding_bf16_sharded"]
    out = tmp_path / "nested" / "eval_results.json"
    result = run_cli(capsys, pair, out, "--suite", "coding10", "--name", "step4000")
    assert result.code == 0, result.stderr
    data = json.loads(out.read_text())
    assert list(data) == [
        "schema", "suite", "checkpoint", "block_size", "attention", "n_anchors", "device", "elapsed_s",
        "metrics", "greedy", "tasks",
    ]  # fmt: skip
    assert data["attention"] == {
        "sliding": "bidirectional", "full": "bidirectional", "source": "default", "sliding_layers": 2,
    }  # fmt: skip
    assert data["schema"] == "dflash-eval/1"
    assert data["suite"] == "coding10"
    assert data["checkpoint"]["name"] == "step4000"
    assert data["checkpoint"]["path"] == str(pair.drafter.resolve())
    import hashlib

    assert (
        data["checkpoint"]["config_sha256"]
        == hashlib.sha256((pair.drafter / "config.json").read_bytes()).hexdigest()
    )
    assert data["block_size"] == 6 and data["device"] == "cpu"
    m = data["metrics"]
    assert set(m) == {
        "acc", "acc_per_position", "streak_top1", "streak_top4", "streak_top8", "tau_top1",
        "ddtree_b4", "ddtree_b8", "ddtree_b16", "ddtree_b32", "tau_greedy",
        "tau_greedy_ddtree_b4", "tau_greedy_ddtree_b8", "tau_greedy_ddtree_b16",
        "tau_greedy_ddtree_b32",
    }  # fmt: skip
    greedy = data["greedy"]
    assert greedy["labels"] == "cache"  # a synthetic cache: not the target's greedy output
    assert m["tau_greedy"] == greedy["n_generated"] / greedy["n_blocks"]
    assert m["tau_greedy_ddtree_b8"] == greedy["n_generated"] / greedy["ddtree_blocks"]["b8"]
    tasks = data["tasks"].values()
    assert sum(t["n_blocks"] for t in tasks) == greedy["n_blocks"]  # micro over blocks
    assert sum(t["n_generated"] for t in tasks) == greedy["n_generated"]
    assert len(m["acc_per_position"]) == 5
    assert m["tau_top1"] == pytest.approx(m["streak_top1"] + 1)
    assert m["streak_top1"] <= m["streak_top4"] <= m["streak_top8"]
    assert set(data["tasks"]) == {"alpha", "beta"}  # two samples named alpha form one task
    n = sum(t["n_anchors"] for t in data["tasks"].values())
    assert n == data["n_anchors"]
    weighted = sum(t["streak_top1"] * t["n_anchors"] for t in data["tasks"].values()) / n
    assert weighted == pytest.approx(m["streak_top1"])  # micro average
    assert not [p for p in out.parent.iterdir() if p.name != out.name]  # no temporary left behind


def test_event_stream(capsys, small, tmp_path):
    out = tmp_path / "r.json"
    result = run_cli(capsys, small, out, "--batch-anchors", "8")
    assert result.code == 0
    kinds = [e["event"] for e in result.events]
    assert kinds[0] == "start" and kinds[-1] == "done"
    progress = [e for e in result.events if e["event"] == "progress" and "phase" not in e]
    total = progress[0]["total"]
    assert [p["done"] for p in progress] == [*range(0, total, 8), total]
    # then the greedy walks' last blocks, near the samples' ends (greedy.py)
    walking = [i for i, e in enumerate(result.events) if e.get("phase") == "greedy"]
    assert walking and walking[0] > result.events.index(progress[-1])
    last = result.events[walking[-1]]
    assert last["done"] == last["total"]
    assert result.events[-1]["out"] == str(out)
    assert result.stderr == ""


def test_default_suite_and_name_come_from_the_directories(capsys, small, tmp_path):
    out = tmp_path / "r.json"
    assert run_cli(capsys, small, out).code == 0
    data = json.loads(out.read_text())
    assert data["suite"] == small.cache.name and data["checkpoint"]["name"] == small.drafter.name


def test_topk_and_budgets_options(capsys, small, tmp_path):
    out = tmp_path / "r.json"
    assert run_cli(capsys, small, out, "--topk", "2,3", "--budgets", "5").code == 0
    m = json.loads(out.read_text())["metrics"]
    assert {k for k in m if k.startswith(("streak", "ddtree", "tau"))} == {
        "streak_top1", "streak_top2", "streak_top3", "tau_top1", "ddtree_b5", "tau_greedy",
        "tau_greedy_ddtree_b5",
    }  # fmt: skip


def test_max_anchors_takes_an_even_deterministic_subset(capsys, small, tmp_path):
    inputs = run_mod.open_inputs(small.drafter, small.cache)
    every = run_mod.find_anchors(inputs.samples, 8, None)
    some = run_mod.find_anchors(inputs.samples, 8, 10)
    assert len(some) == 10
    assert some == [every[i * len(every) // 10] for i in range(10)]
    assert {a.sample for a in some} == {a.sample for a in every}
    out = tmp_path / "r.json"
    assert run_cli(capsys, small, out, "--max-anchors", "10").code == 0
    assert json.loads(out.read_text())["n_anchors"] == 10


def test_out_of_memory_halves_the_batch_and_retries(capsys, small, tmp_path, monkeypatch):
    seen = []
    real = run_mod.Runner.score

    def flaky(self, batch):
        seen.append(len(batch))
        if len(batch) > 3:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(self, batch)

    monkeypatch.setattr(run_mod.Runner, "score", flaky)
    out = tmp_path / "r.json"
    result = run_cli(capsys, small, out, "--batch-anchors", "12")
    assert result.code == 0, result.stderr
    retries = [e["batch_anchors"] for e in result.events if e["event"] == "retry"]
    assert retries == [6, 3]
    assert seen[:3] == [12, 6, 3] and max(seen[3:]) == 3
    monkeypatch.undo()
    reference = tmp_path / "ref.json"
    assert run_cli(capsys, small, reference).code == 0
    assert json.loads(out.read_text())["metrics"] == json.loads(reference.read_text())["metrics"]


def test_out_of_memory_at_batch_one_fails_clearly(capsys, small, tmp_path, monkeypatch):
    def always(self, batch):
        raise torch.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(run_mod.Runner, "score", always)
    out = tmp_path / "r.json"
    result = run_cli(capsys, small, out, "--batch-anchors", "2")
    assert result.code == 1
    assert "out of memory on cpu even with one anchor per batch" in result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_an_explicit_cuda_device_without_cuda_exits_2(capsys, small, tmp_path):
    """Eval jobs always pass --device: asked for cuda, the harness never falls back to the CPU."""
    out = tmp_path / "r.json"
    result = run_cli(capsys, small, out, "--device", "cuda:0")
    assert result.code == 2
    assert "--device cuda:0: CUDA is not available here" in result.stderr
    assert "use --device cpu" in result.stderr
    assert result.events[-1]["event"] == "error" and result.events[-1]["exit_code"] == 2
    assert not out.exists()


def test_existing_results_survive_a_failed_run(capsys, small, tmp_path):
    out = tmp_path / "r.json"
    out.write_text('{"old": true}')
    bad = tmp_path / "missing"
    result = run_cli(capsys, type(small)(bad, small.cache), out)
    assert result.code == 2
    assert json.loads(out.read_text()) == {"old": True}


def _copied_harness(tmp_path: Path) -> Path:
    """The harness bundle as the console uploads it, under a name that is not a Python
    identifier."""
    dest = tmp_path / "upload" / ("0" * 12 + "sha")
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(harness_tar())) as tar:
        tar.extractall(dest, filter="data")
    return dest


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env["PYTHONWARNINGS"] = "ignore"
    return env


def test_copied_directory_runs_alone(small, tmp_path):
    """The documented form for an uploaded copy: ``python DIR --drafter ... --out ...``."""
    harness = _copied_harness(tmp_path)
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    out = tmp_path / "results" / "eval_results.json"
    args = [
        "--drafter",
        str(small.drafter),
        "--cache",
        str(small.cache),
        "--out",
        str(out),
        "--device",
        "cpu",
    ]
    proc = subprocess.run(
        [sys.executable, str(harness), *args],
        cwd=elsewhere, env=_clean_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1])["event"] == "done"
    assert json.loads(out.read_text())["schema"] == "dflash-eval/1"
    # the same through the file, on a bad input: exit 2, one clean message
    proc = subprocess.run(
        [sys.executable, str(harness / "__main__.py"), *args, "--max-anchors", "0"],
        cwd=elsewhere, env=_clean_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and "expected a positive integer" in proc.stderr


def test_harness_imports_only_stdlib_torch_safetensors_and_itself():
    """Every import in the shipped bundle (the harness, `common/` and the bootstrap) is
    stdlib, torch, safetensors or relative; from above its own folder, only `common`."""
    allowed = set(sys.stdlib_module_names) | {"torch", "safetensors"}
    shipped = HARNESS_DIR.parent
    files = [*HARNESS_DIR.glob("*.py"), *(shipped / "common").glob("*.py")]
    for path in sorted([*files, shipped / "bundle_main.py", shipped / "__init__.py"]):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            elif isinstance(node, ast.ImportFrom) and node.level > 1:
                assert (node.module or "").split(".")[0] == "common", f"{path.name}: {node.module}"
                continue
            else:
                continue
            for name in names:
                assert name.split(".")[0] in allowed, f"{path.name} imports {name}"


def test_module_entry_point(tmp_path):
    env = _clean_env()
    env["PYTHONPATH"] = str(HARNESS_DIR.parents[2])
    proc = subprocess.run(
        [sys.executable, "-m", "dflash_tui.shipped.harness", "--help"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "--drafter" in proc.stdout and "--batch-anchors" in proc.stdout


def test_nan_logits_fail_with_exit_1(capsys, small, tmp_path):
    from safetensors import safe_open

    from dflash_tui.demo.synthetic import save_safetensors

    drafter = tmp_path / "drafter"
    shutil.copytree(small.drafter, drafter)
    path = drafter / "model.safetensors"
    with safe_open(str(path), framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
    tensors["norm.weight"] = torch.full_like(tensors["norm.weight"], float("nan"))
    save_safetensors(path, tensors)
    result = run_cli(capsys, type(small)(drafter, small.cache), tmp_path / "r.json")
    assert result.code == 1
    assert "NaN logits" in result.stderr and "Traceback" not in result.stderr
