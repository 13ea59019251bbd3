"""The served bench's test assets: a tiny target and DFlash drafter, a cache built from the
target's greedy continuations, the harness's tau_greedy on it, and the stand-in engine
(`standin_engine.py`) that serves them as vLLM does. Shared by the ssh and Slurm tests."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from dflash_tui.shipped.cachebuild import cli as cachebuild_cli
from dflash_tui.shipped.harness import cli as harness_cli

HARNESS_TESTS = Path(__file__).resolve().parents[1] / "harness"
STANDIN = Path(__file__).resolve().parent / "standin_engine.py"
PROMPTS = {"math": [[5, 9, 13, 2, 40], [60, 1, 18, 44, 3, 29]], "code": [[33, 7, 7, 21]]}
MAX_NEW = 24
FAILURES = ("refuse", "oom", "die", "nospec")


def standin_engines(target: Path) -> list[str]:
    """The stand-in engines serving `target` now, as "PID PGID ARGV" lines: the processes
    whose script is STANDIN and whose arguments name `target` (another test file's models,
    in another xdist worker, are not ours to count or kill), from /proc/PID/cmdline. Not from `ps`: it cuts its lines at
    $COLUMNS, which a pytest process hands every child as 80 (its capture imports
    readline, which exports the terminal's size at the C level, out of `os.environ`'s
    sight), so a long checkout path hid the engine; and the bench's own processes name
    STANDIN inside their `--engine-command` argument without being an engine."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = [
                a.decode(errors="replace") for a in (entry / "cmdline").read_bytes().split(b"\0")
            ]
            pgid = (entry / "stat").read_text().rsplit(") ", 1)[1].split()[2]
        except (OSError, IndexError):
            continue  # gone meanwhile
        if len(argv) > 1 and argv[1] == str(STANDIN) and str(target) in argv:
            found.append(f"{entry.name} {pgid} {' '.join(a for a in argv if a)}")
    return found


@dataclass(frozen=True)
class Models:
    target: Path
    drafter: Path
    cache: Path
    tau_greedy: dict[str, float]  # per task, from the harness on the same cache


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Models:
    import torch

    sys.path.insert(0, str(HARNESS_TESTS))
    from test_speculative_loop import HIDDEN, LAYER_IDS, VOCAB, copy_drafter

    from dflash_tui.demo.synthetic_target import write_target

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("served-bench")
    target = write_target(root / "target", seed=3, vocab_size=VOCAB, hidden_size=HIDDEN)
    drafter = copy_drafter(root / "drafter", target, noise=0.15, mask_kept=0.0)
    prompts = root / "prompts.jsonl"
    prompts.write_text(
        "".join(
            json.dumps({"name": task, "input_ids": ids}) + "\n"
            for task, group in PROMPTS.items()
            for ids in group
        )
    )
    cache = root / "cache"
    argv = ["--target", str(target), "--prompts", str(prompts), "--out", str(cache)]
    argv += ["--target-layer-ids", ",".join(map(str, LAYER_IDS)), "--max-new-tokens", str(MAX_NEW)]
    results = root / "offline.json"
    with contextlib.redirect_stdout(io.StringIO()):
        assert cachebuild_cli.main([*argv, "--device", "cpu"]) == 0
        args = ["--drafter", str(drafter), "--cache", str(cache), "--out", str(results)]
        assert harness_cli.main([*args, "--device", "cpu"]) == 0
    tasks = json.loads(results.read_text())["tasks"]
    return Models(target, drafter, cache, {t: tasks[t]["tau_greedy"] for t in PROMPTS})
