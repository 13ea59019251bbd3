"""Checkpoint completeness from scans, the scan script on real directories, and progress series."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from dflash_tui.core.config import RunConfig
from dflash_tui.core.config_parse import parse_config
from dflash_tui.core.schemas import RESULTS as RESULTS_SCHEMA
from dflash_tui.core.state import open_state
from dflash_tui.evals.discovery.sweep import SCAN_SCRIPT, CheckpointWatcher, Listing, parse_scan
from dflash_tui.evals.results.progress import build_progress, run_progress
from dflash_tui.evals.results.schema import parse_results
from dflash_tui.evals.results.store import ResultsStore

RUN = RunConfig(name="r1", host="h", log="train.log", checkpoints="ckpt/step-*")


def _listing(path: str, **files: int) -> Listing:
    sizes = {n.replace("__", "."): (size, 1) for n, size in files.items()}
    promised = {n: s for n, (s, _) in sizes.items() if n.endswith(".safetensors")}
    return Listing(path, sizes, expected=promised)


def test_missing_names_what_a_checkpoint_still_lacks() -> None:
    assert _listing("a", model__safetensors=5).missing() == "no config.json yet"
    assert _listing("a", config__json=2).missing() == "no weight files yet"
    assert _listing("a", config__json=2, model__safetensors=5).missing() is None
    temporary = _listing("ckpt/step-2000.tmp-77", config__json=2, model__safetensors=5)
    assert "temporary" in (temporary.missing() or "")
    assert (
        _listing("a", config__json=2, model__safetensors=0).missing()
        == "model.safetensors is empty"
    )
    partial = _listing("a", config__json=2, model__safetensors=5, **{"model.safetensors.part": 3})
    assert partial.missing() is not None and "still being written" in partial.missing()
    growing = Listing("a", {"config.json": (2, 1), "model.safetensors": (50, 1)}, (), {})
    assert "header not readable" in (growing.missing() or "")
    short = Listing(
        "a", {"config.json": (2, 1), "model.safetensors": (50, 1)}, (), {"model.safetensors": 80}
    )
    assert short.missing() == "model.safetensors is still being written (50 of 80 bytes)"
    promised = {f"model-0000{i}-of-00002.safetensors": 5 for i in (1, 2)}
    shards = Listing(
        "a",
        {
            "config.json": (2, 1),
            "model.safetensors.index.json": (9, 1),
            "model-00001-of-00002.safetensors": (5, 1),
        },
        ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"),
        promised,
    )
    assert "waiting for 1 of 2 shards" in (shards.missing() or "")
    whole = Listing(
        "a",
        {**shards.files, "model-00002-of-00002.safetensors": (5, 1)},
        shards.shards,
        promised,
    )
    assert whole.missing() is None
    no_index = Listing("a", {"config.json": (2, 1), "model-00001-of-00002.safetensors": (5, 1)})
    assert "without model.safetensors.index.json" in (no_index.missing() or "")


def test_watcher_needs_two_identical_scans() -> None:
    watcher = CheckpointWatcher(RUN)
    growing = [_listing("ckpt/step-200", config__json=2, model__safetensors=100)]
    first = watcher.update(growing)
    assert not first[0].complete and "still changing" in (first[0].reason or "")
    grown = [_listing("ckpt/step-200", config__json=2, model__safetensors=200)]
    assert not watcher.update(grown)[0].complete
    settled = watcher.update(grown)[0]
    assert settled.complete and settled.ref.name == "r1/step-200" and settled.ref.step == 200
    assert settled.ref.run == "r1" and settled.ref.host == "h"


def test_watcher_orders_by_step() -> None:
    watcher = CheckpointWatcher(RUN)
    listings = [
        _listing(f"ckpt/step-{n}", config__json=2, model__safetensors=5) for n in (1000, 200, 30)
    ]
    watcher.update(listings)
    assert [s.ref.step for s in watcher.update(listings)] == [30, 200, 1000]


def test_scan_script_on_real_directories(tmp_path: Path) -> None:
    import torch

    from dflash_tui.demo.synthetic import save_safetensors

    one = tmp_path / "ckpt" / "step-100"
    one.mkdir(parents=True)
    (one / "config.json").write_text("{}")
    save_safetensors(one / "model.safetensors", {"a": torch.ones(3, 5), "b": torch.zeros(7)})
    whole = (one / "model.safetensors").read_bytes()
    cut = tmp_path / "ckpt" / "step-150"  # a trainer half way through writing its weights
    cut.mkdir()
    (cut / "config.json").write_text("{}")
    (cut / "model.safetensors").write_bytes(whole[: len(whole) - 20])
    sharded = tmp_path / "ckpt" / "step 200"  # a space in the name
    sharded.mkdir()
    (sharded / "config.json").write_text("{}")
    index = {"weight_map": {"a.weight": "model-1.safetensors", "b.weight": "model-2.safetensors"}}
    (sharded / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    save_safetensors(sharded / "model-1.safetensors", {"a": torch.ones(2)})
    (tmp_path / "ckpt" / "step-300.txt").write_text("not a directory")
    out = subprocess.run(
        ["sh", "-c", SCAN_SCRIPT, "sh", "ckpt/step-*", "ckpt/step *", "nothing/*"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    listings = {item.path: item for item in parse_scan(out)}
    assert set(listings) == {"ckpt/step-100", "ckpt/step-150", "ckpt/step 200"}
    assert listings["ckpt/step-100"].files["model.safetensors"][0] == len(whole)
    assert listings["ckpt/step-100"].expected["model.safetensors"] == len(whole)
    assert listings["ckpt/step-100"].missing() is None
    assert "still being written" in (listings["ckpt/step-150"].missing() or "")
    assert listings["ckpt/step 200"].shards == ("model-1.safetensors", "model-2.safetensors")
    assert "waiting for 1 of 2" in (listings["ckpt/step 200"].missing() or "")


CONFIG = """
[console]
state_dir = "state"
results_dir = "results"
known_hosts = "known_hosts"

[hosts.h]
address = "127.0.0.1"

[[runs]]
name = "r1"
host = "h"
log = "train.log"
checkpoints = "ckpt/step-*"
auto_eval = ["coding"]

[[checkpoints]]
name = "zlab"
host = "h"
path = "/models/zlab"
baseline = true

[[suites]]
name = "coding"
host = "h"
cache = "/eval/coding"
"""


def _result(name: str, tau: float, acc: float) -> bytes:
    doc = {
        "schema": "dflash-eval/1",
        "suite": "coding",
        "checkpoint": {"name": name, "path": f"/x/{name}", "config_sha256": None},
        "block_size": 8,
        "n_anchors": 10,
        "device": "cpu",
        "elapsed_s": 1.0,
        "metrics": {"acc": acc, "streak_top1": tau - 1, "tau_top1": tau},
        "tasks": {},
    }
    return json.dumps(doc).encode()


def test_progress_series_per_metric_with_baseline(tmp_path: Path) -> None:
    config = parse_config(CONFIG, tmp_path / "hosts.toml")
    conn = open_state(tmp_path / "state", RESULTS_SCHEMA)
    store = ResultsStore(tmp_path / "results", conn)
    now = time.time()

    def add(name: str, tau: float, acc: float, *, run: str | None, step: int | None, at: float):
        raw = _result(name, tau, acc)
        store.add(
            parse_results(raw),
            raw,
            suite="coding",
            checkpoint=name,
            source="job",
            created_at=at,
            collected_at=at,
            run=run,
            step=step,
        )

    add("zlab", 5.0, 0.5, run=None, step=None, at=now)
    add("r1/step-300", 3.0, 0.3, run="r1", step=300, at=now + 1)
    add("r1/step-100", 1.5, 0.1, run="r1", step=100, at=now + 2)
    add("r1/step-200", 2.0, 0.2, run="r1", step=None, at=now + 3)  # step from the name
    add("r1/step-200", 2.5, 0.25, run="r1", step=200, at=now + 4)  # a newer result wins
    add("other/step-100", 7.0, 0.9, run="other", step=100, at=now + 5)

    progress = build_progress(config, store, "r1", "coding")
    tau = progress.series["tau_top1"]
    assert [(p.step, p.value) for p in tau.points] == [(100, 1.5), (200, 2.5), (300, 3.0)]
    assert tau.baseline == 5.0 and tau.latest_ratio == 0.6
    assert progress.series["acc"].values == [0.1, 0.25, 0.3]
    assert list(progress.series)[:3] == ["tau_top1", "acc", "streak_top1"]
    doc = progress.as_dict()
    assert doc["baseline"] == "zlab"
    assert doc["metrics"]["tau_top1"]["points"][0] == {
        "step": 100,
        "value": 1.5,
        "checkpoint": "r1/step-100",
    }
    assert [p.suite for p in run_progress(config, store, "r1")] == ["coding"]
    empty = build_progress(config, store, "nobody", "coding")
    assert not empty.series and "no results" in (empty.note or "")
    conn.close()
