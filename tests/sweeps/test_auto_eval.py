"""Auto-eval of a run's checkpoints as training writes them (the must-show sweep test).

A "trainer" thread writes three checkpoints into the run's glob on a real sshd
host over time: step-100 at once, step-200 slowly (its weights grow in chunks
for a few seconds, so a scan sees it incomplete and then still changing), and
step-300 sharded with its index first and shards later. AutoEval ticks while
that happens; the run must get exactly three evals, each checkpoint once,
each started only after its files were final, and the progress series three
points.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import threading
import time
from pathlib import Path

from dflash_tui.core.config_parse import load_config
from dflash_tui.evals.jobs import job as J
from dflash_tui.evals.jobs.manager import JobManager, open_eval_state
from dflash_tui.evals.jobs.sweeps import AutoEval
from dflash_tui.evals.results.progress import build_progress
from dflash_tui.remote import HostPool
from tests.evals.cluster import Assets, assets, place  # noqa: F401 - the session fixture
from tests.testbed import SshdHost

DEADLINE_S = 120


def _write_slowly(src: Path, dst: Path, seconds: float) -> None:
    data = src.read_bytes()
    chunks = 6
    with open(dst, "wb") as f:
        for i in range(chunks):
            f.write(data[i * len(data) // chunks : (i + 1) * len(data) // chunks])
            f.flush()
            time.sleep(seconds / chunks)


def _trainer(staging: Path, ckpt: Path, done: threading.Event) -> None:
    """Writes step-100, step-200 (slowly), step-300 (sharded, index first)."""
    try:
        time.sleep(0.5)
        shutil.copytree(staging / "step-100", ckpt / "step-100")
        time.sleep(1.0)
        slow = ckpt / "step-200"
        slow.mkdir()
        shutil.copy(staging / "step-200" / "config.json", slow / "config.json")
        _write_slowly(staging / "step-200" / "model.safetensors", slow / "model.safetensors", 4.0)
        time.sleep(1.0)
        sharded = ckpt / "step-300"
        sharded.mkdir()
        src = staging / "step-300"
        shutil.copy(src / "config.json", sharded / "config.json")
        shutil.copy(src / "model.safetensors.index.json", sharded / "model.safetensors.index.json")
        for shard in sorted(src.glob("model-*.safetensors")):
            time.sleep(1.0)
            shutil.copy(shard, sharded / shard.name)
    finally:
        done.set()


def _shard(src: Path, dst: Path) -> None:
    """A copy of drafter `src` with its weights split into two shards plus an index."""
    import json

    from safetensors.torch import load_file

    from dflash_tui.demo.synthetic import save_safetensors

    dst.mkdir(parents=True)
    shutil.copy(src / "config.json", dst / "config.json")
    tensors = load_file(str(src / "model.safetensors"))
    names = sorted(tensors)
    half = len(names) // 2
    weight_map = {}
    for i, part in enumerate((names[:half], names[half:]), start=1):
        file = f"model-0000{i}-of-00002.safetensors"
        save_safetensors(dst / file, {n: tensors[n] for n in part})
        weight_map.update(dict.fromkeys(part, file))
    (dst / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))


async def test_three_checkpoints_written_over_time_get_three_evals_each_once(
    sshd: SshdHost,
    write_config,
    assets: Assets,  # noqa: F811
    tmp_path: Path,
) -> None:
    from dflash_tui.demo.synthetic import write_drafter

    staging = tmp_path / "staging"
    for i, quality in enumerate((0.2, 0.5, 0.8), start=1):
        write_drafter(staging / f"step-{i * 100}", teacher=assets.teacher, quality=quality, seed=i)
    _shard(staging / "step-300", staging / "step-300-sharded")
    shutil.rmtree(staging / "step-300")
    (staging / "step-300-sharded").rename(staging / "step-300")
    cache = place(assets.cache, sshd, "eval/coding")
    zlab = place(assets.teacher, sshd, "models/zlab")
    ckpt = sshd.home / "ckpt"
    ckpt.mkdir()
    extra = f"""
[[runs]]
name = "r1"
host = "gpu"
log = "train.log"
checkpoints = "ckpt/step-*"
auto_eval = ["coding"]
max_parallel = 2

[[checkpoints]]
name = "zlab"
host = "gpu"
path = "{zlab}"
baseline = true

[[suites]]
name = "coding"
host = "gpu"
cache = "{cache}"
max_anchors = 8
device = "cpu"
"""
    # Relative globs are relative to the login directory: run the shell in the sshd's HOME.
    config = load_config(
        write_config(
            {
                "gpu": (
                    sshd,
                    {"python": sys.executable, "exec_prefix": ["env", "-C", str(sshd.home)]},
                )
            },
            extra=extra,
        )
    )
    conn = open_eval_state(config.console.state_dir)
    pool = HostPool(config)
    manager = JobManager(config, pool, conn)
    auto = AutoEval(config, pool, manager, interval_s=0.3)

    # Record each checkpoint's files when its eval is queued: they must be final by then.
    seen_at_start: dict[str, dict[str, int]] = {}
    start_eval = manager.start_eval

    async def recording_start_eval(ref, suite, host=None, gpu=None):  # type: ignore[no-untyped-def]
        path = Path(ref.path) if Path(ref.path).is_absolute() else sshd.home / ref.path
        seen_at_start[ref.name] = {p.name: p.stat().st_size for p in path.iterdir()}
        return await start_eval(ref, suite, host, gpu)

    manager.start_eval = recording_start_eval  # type: ignore[method-assign]
    done = threading.Event()
    writer = threading.Thread(target=_trainer, args=(staging, ckpt, done), daemon=True)
    writer.start()
    try:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            await auto.tick()
            await manager.poll()
            jobs = manager.jobs()
            active = [j for j in jobs if not j.terminal]
            assert len(active) <= 2, active  # max_parallel = 2
            if done.is_set() and len(jobs) == 3 and not active:
                break
            assert time.monotonic() < deadline, jobs
            await asyncio.sleep(0.3)
        # More ticks change nothing: every checkpoint is evaluated once.
        for _ in range(3):
            assert await auto.tick() == []
        jobs = manager.jobs()
        assert sorted(j.checkpoint for j in jobs) == ["r1/step-100", "r1/step-200", "r1/step-300"]
        assert all(j.state == J.DONE for j in jobs), [(j.checkpoint, j.describe()) for j in jobs]
        for name, files in seen_at_start.items():
            final = ckpt / name.split("/")[1]
            assert files == {p.name: p.stat().st_size for p in final.iterdir()}, name
        # the extra ticks above collected the finished auto-evals
        progress = build_progress(config, manager.results, "r1", "coding")
        tau = progress.series["tau_top1"]
        assert tau.steps == [100, 200, 300] and tau.baseline is None  # zlab not evaluated
        statuses = {s.ref.name: s.complete for s in auto.state["r1"].statuses}
        assert statuses == dict.fromkeys(["r1/step-100", "r1/step-200", "r1/step-300"], True)
    finally:
        writer.join(10)
        await manager.close()
        await pool.close()
        conn.close()
