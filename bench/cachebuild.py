"""Cache build throughput: new tokens per second of the builder against generation alone.

What an operator would run instead of the builder is a plain greedy
``model.generate(do_sample=False)`` loop over the prompts (which gives the
tokens, but no hidden states); the builder does that, plus one forward over
prompt + continuation for the features and the sample files. Both are timed
side by side in one run, on the same model and prompts, and the ratio says
what the cache costs over generating alone.

CPU mode (default): the tiny random-weight Qwen3 target of the tests (hidden
64, 4 layers, vocab 64, float32), 8 prompts of 16 tokens, 128 new tokens each.

GPU mode (``--gpu``): a Qwen3.6-27B-shaped target (hidden 5120, 32 heads / 8
kv heads of 128, intermediate 17408, vocab 248320) cut to 4 layers, random
weights, bf16, on cuda:0, written once to a temporary directory (about 8 GB),
8 prompts of 512 tokens, 512 new tokens each, layer ids 1,2,3. Needs
transformers on the GPU machine (the ``cache`` extra).

    .venv/bin/python bench/cachebuild.py
    .venv/bin/python bench/cachebuild.py --gpu
    .venv/bin/python bench/cachebuild.py --gpu --tiny --device cpu   # path check only

``--tiny`` shrinks the GPU setup (hidden 128, vocab 1024, 64 + 32 tokens) so its
code path (bf16, the GPU layer ids) can be checked without a GPU.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src")]

import torch  # noqa: E402

from dflash_tui.demo.synthetic_target import target_config  # noqa: E402
from dflash_tui.shipped.cachebuild.build import Options, Target, build  # noqa: E402

GPU_SHAPE = {
    "vocab_size": 248320,
    "hidden_size": 5120,
    "num_layers": 4,
    "num_heads": 32,
    "num_kv_heads": 8,
    "head_dim": 128,
    "intermediate_size": 17408,
}


def write_target(out: Path, device: str, dtype: torch.dtype, shape: dict) -> None:
    """Random weights, made on the device (fast for the GPU shape), saved as a model dir."""
    from transformers import Qwen3ForCausalLM

    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen3ForCausalLM(target_config(**shape)).to(dtype)
    model.save_pretrained(str(out))
    del model


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def generate_only(target: Target, prompts: list[list[int]], new: int) -> tuple[float, int]:
    """Seconds and new tokens of plain greedy generation over every prompt."""
    sync(str(target.device))
    t0 = time.perf_counter()
    tokens = 0
    for ids in prompts:
        tokens += target.generate(ids, new).numel() - len(ids)
    sync(str(target.device))
    return time.perf_counter() - t0, tokens


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpu", action="store_true", help="27B-shaped target on cuda:0 (bf16)")
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--prompt-len", type=int, default=None)
    p.add_argument("--max-new-tokens", type=int, default=None)
    p.add_argument("--rounds", type=int, default=5, help="alternated rounds; best of each")
    p.add_argument("--device", default=None, help="default: cuda:0 with --gpu, else cpu")
    p.add_argument("--tiny", action="store_true", help="with --gpu: a small model, same path")
    args = p.parse_args()
    device = args.device or ("cuda:0" if args.gpu else "cpu")
    dtype = torch.bfloat16 if args.gpu else torch.float32
    shape = GPU_SHAPE if args.gpu else {"vocab_size": 64, "hidden_size": 64, "num_layers": 4}
    if args.gpu and args.tiny:
        shape = {**GPU_SHAPE, "vocab_size": 1024, "hidden_size": 128, "num_heads": 4}
        shape.update(num_kv_heads=2, head_dim=32, intermediate_size=256)
    ids = (1, 2, 3) if args.gpu else (1, 3)
    big = args.gpu and not args.tiny
    prompt_len = args.prompt_len or (512 if big else 64 if args.gpu else 16)
    new = args.max_new_tokens or (512 if big else 32 if args.gpu else 128)
    if not device.startswith("cuda"):
        torch.set_num_threads(1)  # a shared 2-core machine: one thread, steadier figures

    tmp = Path(tempfile.mkdtemp(prefix="bench-cachebuild-"))
    try:
        t0 = time.perf_counter()
        write_target(tmp / "target", device, dtype, shape)
        made = time.perf_counter() - t0
        gen = torch.Generator().manual_seed(1)
        vocab = shape["vocab_size"]
        prompts = [
            torch.randint(0, vocab, (prompt_len,), generator=gen).tolist()
            for _ in range(args.prompts)
        ]
        (tmp / "prompts.jsonl").write_text(
            "".join(
                json.dumps({"name": f"p{i}", "input_ids": x}) + "\n" for i, x in enumerate(prompts)
            )
        )
        target = Target(tmp / "target", torch.device(device), dtype)
        target.generate(prompts[0][:8], 4)  # warm-up (kernels, allocator)
        best_gen = best_loop = best_wall = float("inf")
        for round_ in range(args.rounds):  # alternated, best of each: the machine is shared
            gen_s, gen_tokens = generate_only(target, prompts, new)
            best_gen = min(best_gen, gen_s)
            events: list[dict] = []
            opts = Options(
                target=tmp / "target",
                prompts=tmp / "prompts.jsonl",
                out=tmp / f"cache{round_}",
                max_new_tokens=new,
                layer_ids=ids,
                device=device,
            )
            t0 = time.perf_counter()
            summary = build(opts, events.append)
            best_wall = min(best_wall, time.perf_counter() - t0)
            samples = [e for e in events if e["event"] == "sample"]
            best_loop = min(best_loop, sum(e["elapsed_s"] for e in samples))
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
        agree = sum(e["greedy_agree"] for e in samples)
        size = sum(f.stat().st_size for f in (tmp / "cache0").iterdir())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    built = summary["new_tokens"]
    print(f"target: {shape} {str(dtype).replace('torch.', '')} on {device}; layer ids {ids}")
    print(
        f"{args.prompts} prompts x {prompt_len} tokens, {new} new tokens each; best of "
        f"{args.rounds} alternated rounds (target written in {made:.1f} s)"
    )
    print(f"generate only (do_sample=False):   {gen_tokens / best_gen:10.1f} new tok/s")
    print(
        f"cache build, per sample:           {built / best_loop:10.1f} new tok/s "
        f"(generate + forward + write)"
    )
    print(
        f"cache build, end to end:           {built / best_wall:10.1f} new tok/s (with model load, in-process)"
    )
    print(f"build / generate-only throughput: {best_gen / gen_tokens * built / best_loop:10.2f}")
    print(f"cache size {size / 1e6:.1f} MB; greedy agreement {agree}/{built}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
