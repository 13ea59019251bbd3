"""Eval harness throughput: anchors per second, batched forward against the alternatives.

CPU mode (default) writes a small synthetic drafter and cache, then scores
them three ways and prints anchors per second and the ratios:

* the harness as shipped (batched, shared context K/V, ``--batch-anchors``);
* the harness's forward one anchor at a time (batch 1);
* the plain per-anchor reference of the tests (loops, float64), which is what
  a straightforward eval script looks like.

GPU mode (``--gpu``) builds a Qwen3.6-27B-DFlash-sized drafter in memory
(hidden 5120, 5 layers, 32 heads / 8 kv heads of 128, intermediate 17408,
vocab 248320, block 16, 5 feature layers; random weights, bf16), 10 samples of
2048 tokens, and scores every anchor once through the same scoring loop as the
harness, plus a batch-1 run on a subset for the ratio. ``--tiny`` shrinks
that setup to a few MB so its code path can be checked on a CPU.

    .venv/bin/python bench/harness.py
    .venv/bin/python bench/harness.py --gpu
    .venv/bin/python bench/harness.py --gpu --tiny --device cpu
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests" / "harness")]

import torch  # noqa: E402

from dflash_tui.shipped.harness.cache import SampleSpec  # noqa: E402
from dflash_tui.shipped.harness.drafter import DrafterConfig, weight_shapes  # noqa: E402
from dflash_tui.shipped.harness.model import DrafterModel  # noqa: E402
from dflash_tui.shipped.harness.run import Anchor, Runner, find_anchors, open_inputs, score_anchors  # noqa: E402

TOPK = (1, 4, 8)
BUDGETS = (4, 8, 16, 32)


def _quiet(event: dict) -> None:
    return None


def _timed_score(runner: Runner, anchors: list[Anchor], batch: int) -> float:
    """Anchors per second through the harness's scoring loop (metrics included)."""
    if runner.device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    score_anchors(runner, anchors, TOPK, BUDGETS, batch, _quiet)
    if runner.device.type == "cuda":
        torch.cuda.synchronize()
    return len(anchors) / (time.perf_counter() - t0)


def cpu_bench(args: argparse.Namespace) -> dict:
    """Write the small synthetic pair to a temporary directory and time the three ways."""
    with tempfile.TemporaryDirectory(prefix="bench_harness_") as tmp:
        return _cpu_bench(args, Path(tmp))


def _cpu_bench(args: argparse.Namespace, tmp: Path) -> dict:
    from harness_reference import anchor_logits, read_cache, read_drafter, reference_metrics

    from dflash_tui.demo.synthetic import write_cache, write_drafter

    arch = {
        "hidden_size": 256,
        "num_layers": 2,
        "num_heads": 8,
        "num_kv_heads": 2,
        "head_dim": 32,
        "intermediate_size": 768,
        "vocab_size": 8192,
        "block_size": 16,
        "target_layer_ids": (1, 5, 9),
        "num_target_layers": 12,
    }
    drafter = write_drafter(tmp / "drafter", **arch)
    cache = write_cache(
        tmp / "cache",
        drafter_dir=drafter,
        n_samples=4,
        seq_len=args.seq_len,
        anchors="all",
        prompt_len=64,
    )
    inputs = open_inputs(drafter, cache)
    anchors = find_anchors(inputs.samples, 16, None)
    cpu = torch.device("cpu")

    runner = Runner.from_inputs(inputs, cpu, torch.float32, max(BUDGETS))
    _timed_score(runner, anchors[:32], args.batch_anchors)  # warm-up
    runner = Runner.from_inputs(inputs, cpu, torch.float32, max(BUDGETS))
    batched = _timed_score(runner, anchors, args.batch_anchors)

    subset = find_anchors(inputs.samples, 16, args.single_anchors)
    runner = Runner.from_inputs(inputs, cpu, torch.float32, max(BUDGETS))
    single = _timed_score(runner, subset, 1)

    raw, weights = read_drafter(drafter)
    embed, lm_head, samples = read_cache(cache)
    few = find_anchors(inputs.samples, 16, args.reference_anchors)
    t0 = time.perf_counter()
    for a in few:
        tensors = samples[a.sample][1]
        logits = anchor_logits(raw, weights, embed, lm_head, tensors, a.position)
        labels = tensors["input_ids"][a.position + 1 : a.position + 16].tolist()
        reference_metrics(logits, labels, list(TOPK), list(BUDGETS))
    reference = len(few) / (time.perf_counter() - t0)
    return {
        "mode": "cpu",
        "threads": torch.get_num_threads(),
        "config": {
            **arch,
            "target_layer_ids": list(arch["target_layer_ids"]),
            "samples": 4,
            "seq_len": args.seq_len,
        },
        "n_anchors": len(anchors),
        "batch_anchors": args.batch_anchors,
        "batched_anchors_per_s": round(batched, 1),
        "batch1_anchors_per_s": round(single, 1),
        "batch1_anchors_measured": len(subset),
        "reference_anchors_per_s": round(reference, 2),
        "reference_anchors_measured": len(few),
        "ratio_batched_vs_reference": round(batched / reference, 1),
        "ratio_batched_vs_batch1": round(batched / single, 2),
    }


class MemoryRunner(Runner):
    """A Runner whose sample features live in memory (no files: a 27B-sized cache is GBs)."""

    def __init__(self, *args: object, feats: list[torch.Tensor], **kwargs: object):
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.feats = feats

    def features(self, sample: int, rows: int) -> torch.Tensor:
        return self.feats[sample][:rows]


def _gpu_setup(
    args: argparse.Namespace, device: torch.device
) -> tuple[MemoryRunner, list[Anchor], dict]:
    if args.tiny:
        h, layers, heads, kv, d, inter, vocab, n_samples, seq = 64, 2, 4, 2, 16, 128, 512, 2, 64
    else:
        h, layers, heads, kv, d, inter, vocab, n_samples, seq = (
            5120,
            5,
            32,
            8,
            128,
            17408,
            248320,
            10,
            2048,
        )
    ids = (1, 16, 31, 46, 61)
    cfg = DrafterConfig(
        hidden_size=h,
        intermediate_size=inter,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=d,
        rms_norm_eps=1e-6,
        rope_theta=1e7,
        vocab_size=vocab,
        block_size=16,
        mask_token_id=vocab - 1,
        target_layer_ids=ids,
        layer_types=("full_attention",) * layers,
        sliding_window=None,
        num_target_layers=64,
    )
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    g = torch.Generator(device=device).manual_seed(0)

    def rand(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return (torch.randn(*shape, generator=g, device=device, dtype=torch.float32) * scale).to(
            dtype
        )

    weights = {}
    for name, shape in weight_shapes(cfg).items():
        weights[name] = (
            1.0 + rand(*shape, scale=0.1)
            if len(shape) == 1
            else rand(*shape, scale=1 / math.sqrt(shape[1]))
        )
    embed = rand(vocab, h)
    lm_head = rand(vocab, h, scale=4 / math.sqrt(h))
    prompt = seq // 16
    samples, feats = [], []
    for i in range(n_samples):
        tokens = torch.randint(0, vocab, (seq,), generator=g, device=device).cpu()
        mask = torch.zeros(seq, dtype=torch.int64)
        mask[prompt:] = 1
        samples.append(SampleSpec(f"task{i}", Path("memory"), seq, len(ids) * h, tokens, mask))
        feats.append(rand(seq, len(ids) * h))
    runner = MemoryRunner(
        cfg, DrafterModel(cfg, weights), embed, lm_head, samples, max(BUDGETS), feats=feats
    )
    anchors = find_anchors(samples, 16, args.max_anchors)
    info = {"hidden_size": h, "layers": layers, "heads": heads, "kv_heads": kv, "head_dim": d,
            "intermediate_size": inter, "vocab_size": vocab, "samples": n_samples, "seq_len": seq}  # fmt: skip
    return runner, anchors, info


def gpu_bench(args: argparse.Namespace) -> dict:
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--gpu needs CUDA (or pass --tiny --device cpu to check the setup path)")
    t0 = time.perf_counter()
    runner, anchors, info = _gpu_setup(args, device)
    setup_s = time.perf_counter() - t0
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    _timed_score(
        runner, anchors[: args.batch_anchors], args.batch_anchors
    )  # warm-up (kernels, allocator)
    runner.release_before(len(runner.samples))
    batched = _timed_score(runner, anchors, args.batch_anchors)
    runner.release_before(len(runner.samples))
    subset = anchors[:: max(1, len(anchors) // args.single_anchors)][: args.single_anchors]
    single = _timed_score(runner, subset, 1)
    out = {
        "mode": "gpu" + ("-tiny" if args.tiny else ""),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "dtype": str(runner.model.dtype).replace("torch.", ""),
        "config": info,
        "setup_s": round(setup_s, 1),
        "n_anchors": len(anchors),
        "batch_anchors": args.batch_anchors,
        "batched_anchors_per_s": round(batched, 1),
        "batched_total_s": round(len(anchors) / batched, 1),
        "batch1_anchors_per_s": round(single, 1),
        "batch1_anchors_measured": len(subset),
        "ratio_batched_vs_batch1": round(batched / single, 2),
    }
    if device.type == "cuda":
        out["peak_gpu_memory_gib"] = round(torch.cuda.max_memory_allocated(device) / 2**30, 1)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpu", action="store_true", help="27B-drafter-sized run (bf16, on --device)")
    p.add_argument(
        "--tiny", action="store_true", help="with --gpu: tiny sizes, to check the setup path"
    )
    p.add_argument("--device", default="cuda:0", help="device for --gpu (default cuda:0)")
    p.add_argument(
        "--batch-anchors", type=int, default=None, help="default 16 on CPU, 64 with --gpu"
    )
    p.add_argument(
        "--max-anchors", type=int, default=None, help="--gpu: score at most this many anchors"
    )
    p.add_argument(
        "--seq-len", type=int, default=512, help="CPU mode: tokens per sample (4 samples)"
    )
    p.add_argument(
        "--single-anchors", type=int, default=200, help="anchors for the batch-1 measurement"
    )
    p.add_argument(
        "--reference-anchors",
        type=int,
        default=12,
        help="CPU mode: anchors for the plain reference",
    )
    args = p.parse_args()
    if args.batch_anchors is None:
        args.batch_anchors = 64 if args.gpu else 16
    result = gpu_bench(args) if args.gpu else cpu_bench(args)
    result["torch"] = torch.__version__
    width = max(len(k) for k in result)
    for k, v in result.items():
        print(f"{k:<{width}}  {v}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
