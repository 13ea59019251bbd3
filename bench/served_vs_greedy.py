"""vLLM's served acceptance length against the harness's ``tau_greedy``.

Same tiny target, same drafter weights, same prompts (as token ids, so no
tokenisation can differ), same length:

1. a tiny random Qwen3 target (``served_vllm``'s shape, head_dim 32 for vLLM's CPU
   attention; ``lm_head[v] = embed_tokens[perm[v]]`` so its greedy output is
   learnable; no end token, so neither side stops early) and a tiny DFlash drafter
   (block size B, full attention, ``target_layer_ids`` 1,2 of 4 target layers) in
   the z-lab layout, which both vLLM's ``dflash`` method and the harness load (one
   directory, one set of weights);
2. a training cache built by the cache builder from the target's greedy
   continuations of random training prompts; the drafter is trained on it for a
   few hundred CPU steps (cross-entropy of the harness's own block forward,
   ``DrafterModel``, against the cache's labels), so its acceptance is neither ~1
   (random) nor B (trivial). ``--k-norm tied`` (default) shares one ``k_norm``
   weight between the drafter's layers, because vLLM's CPU build applies layer 0's
   to the context keys of every layer; ``--k-norm free`` shows what that costs;
3. the evaluation cache: the cache builder on the evaluation prompts with
   ``--max-new-tokens`` = the requests' ``max_tokens``; the harness on it gives
   ``tau_greedy`` per prompt and for the suite (``--per-anchor`` gives every
   block's ``streak_top1``). A second cache B tokens longer gives the drafter's
   streak at the last block without the cut at ``max_tokens``;
4. ``vllm serve`` (vLLM's CPU venv) with ``num_speculative_tokens = B - 1``,
   temperature 0, ``ignore_eos``, one request at a time; the
   ``vllm:spec_decode_*`` counters are read before and after each request, so
   the served acceptance length per prompt is ``1 + d(accepted) / d(drafts)``;
   ``--per-request-spec-decode-metrics detailed`` adds each request's accepted
   drafts per verify step, compared block by block with the harness's streaks;
   the generated token ids are compared with the cache's continuation;
5. one table: the two numbers per prompt and for the suite (micro over blocks
   on both sides), and the harness's walk with the last block not cut at
   ``max_tokens`` (what vLLM's counters count), then the checks.

Run with the project's python:

    .venv/bin/python bench/served_vs_greedy.py [--vllm /tmp/vllmenv/bin/vllm]
        [--block-size 8] [--max-tokens 64] [--steps 400] [--k-norm tied|free]
        [--workdir DIR]

4-7 minutes on 2 shared cores (three cache builds, training ~40 s, vLLM's start-up
40-140 s). Not part of ``make test``: vLLM is not a project dependency.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
import urllib.error
from pathlib import Path

import served_vllm as sv

LAYER_IDS = (1, 2)  # not the last target layer: see "Target features" in docs/benchmarks-history.md
N_EVAL = 8


def _module(*names: str) -> str:
    """The first of ``names`` that imports (modules are being moved between packages)."""
    for name in names:
        try:
            if importlib.util.find_spec(name) is not None:
                return name
        except ModuleNotFoundError:
            continue
    raise ModuleNotFoundError(f"none of {names} found")


HARNESS = _module("dflash_tui.shipped.harness", "dflash_tui.evals.harness")
CACHEBUILD = _module("dflash_tui.shipped.cachebuild", "dflash_tui.evals.cachebuild")
SYNTHETIC = _module("dflash_tui.demo.synthetic", "dflash_tui.evals.synthetic")


def build_target(out: Path, seed: int, std: float) -> None:
    """A tiny random Qwen3 (``served_vllm``'s shape) whose greedy output a small drafter can
    learn: ``lm_head[v] = embed_tokens[perm[v]]``, so the embedding's own path through the
    residual stream proposes ``perm^-1(token)`` next, and the layers (weights of std
    ``std``) add context, which overrides that about one step in five at std 0.1. No end
    token: both sides generate exactly max_tokens."""
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen3Config(
        vocab_size=sv.VOCAB,
        hidden_size=sv.HIDDEN,
        intermediate_size=256,
        num_hidden_layers=sv.TARGET_LAYERS,
        num_attention_heads=sv.HEADS,
        num_key_value_heads=sv.KV_HEADS,
        head_dim=sv.HEAD_DIM,
        max_position_embeddings=4096,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=sv.VOCAB - 2,
    )
    model = Qwen3ForCausalLM(cfg)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, std)
        model.model.embed_tokens.weight.normal_(0.0, 1.0)
        perm = torch.randperm(sv.VOCAB)
        model.lm_head.weight.copy_(0.05 * model.model.embed_tokens.weight[perm])
    model.generation_config = GenerationConfig(pad_token_id=sv.VOCAB - 2)
    model.save_pretrained(out, safe_serialization=True)
    sv.build_tokenizer(out)


def prompts(n: int, seed: int, lo: int, hi: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(len(sv.WORDS)) for _ in range(rng.randint(lo, hi))] for _ in range(n)]


def write_prompts(path: Path, ids: list[list[int]], prefix: str) -> list[str]:
    names = [f"{prefix}{i}" for i in range(len(ids))]
    path.write_text(
        "".join(
            json.dumps({"name": n, "input_ids": p}) + "\n" for n, p in zip(names, ids, strict=True)
        )
    )
    return names


def run_module(module: str, *args: str) -> None:
    cmd = [sys.executable, "-m", module, *args]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout[-3000:], r.stderr[-3000:])
        raise SystemExit(f"{module} failed with exit {r.returncode}")


def build_cache(target: Path, prompts_file: Path, out: Path, max_new: int) -> None:
    run_module(
        CACHEBUILD,
        "--target", str(target), "--prompts", str(prompts_file), "--out", str(out),
        "--max-new-tokens", str(max_new),
        "--target-layer-ids", ",".join(map(str, LAYER_IDS)),
        "--device", "cpu", "--dtype", "float32",
    )  # fmt: skip


def read_cache(cache: Path):
    from safetensors.torch import load_file

    manifest = json.loads((cache / "manifest.json").read_text())
    head = load_file(cache / manifest["head"])
    samples = {s["name"]: load_file(cache / s["file"]) for s in manifest["samples"]}
    return head, samples


def train_drafter(
    drafter: Path, cache: Path, block: int, steps: int, seed: int, tie_k_norm: bool
) -> dict:
    """Train the drafter in place with the harness's own forward (its functions without
    their inference_mode decorators), cross-entropy against the cache's labels.

    ``tie_k_norm``: every layer's ``k_norm.weight`` is one shared parameter. vLLM's CPU
    build normalises the context keys of every drafter layer with the first layer's
    k_norm weight (``_normalize_context_k`` passes a [layers, head_dim] weight to the CPU
    ``rms_norm`` op, which reads only its first row); with the weights tied, that is the
    same function, so the comparison measures everything else."""
    import torch
    import torch.nn.functional as F
    from safetensors.torch import save_file

    drafter_mod = importlib.import_module(HARNESS + ".drafter")
    model_mod = importlib.import_module(HARNESS + ".model")
    torch.manual_seed(seed)
    files = drafter_mod.DrafterFiles(drafter)
    cfg = files.config
    weights = {
        k: v.clone().requires_grad_(True)
        for k, v in files.load(torch.device("cpu"), torch.float32).items()
    }
    if tie_k_norm:
        shared = weights["layers.0.self_attn.k_norm.weight"]
        for i in range(1, cfg.num_layers):
            weights[f"layers.{i}.self_attn.k_norm.weight"] = shared
    model = model_mod.DrafterModel(cfg, weights)
    context = model_mod.DrafterModel.context.__wrapped__
    block_hidden = model_mod.DrafterModel.block_hidden.__wrapped__
    head, samples = read_cache(cache)
    embed, lm_head = head["embed_tokens"].float(), head["lm_head"].float()
    data = []
    for s in samples.values():
        ids, mask = s["input_ids"], s["loss_mask"]
        anchors = [a for a in range(len(ids) - block + 1) if mask[a]]
        data.append((ids, s["hidden_states"].float(), torch.tensor(anchors)))
    params = list({id(v): v for v in weights.values()}.values())  # tied ones once
    opt = torch.optim.AdamW(params, lr=3e-3, weight_decay=0.1)
    pos_w = torch.tensor([math.exp(-i / 3) for i in range(block - 1)])
    pos_w = pos_w / pos_w.sum()
    t0, log = time.monotonic(), []
    for step in range(steps):
        lr = 3e-3 * 0.5 * (1 + math.cos(math.pi * step / steps))
        for g in opt.param_groups:
            g["lr"] = lr
        picks = random.Random(seed * 100003 + step).sample(range(len(data)), 4)
        ctxs, which, anchors, tokens, labels = [], [], [], [], []
        for j, i in enumerate(picks):
            ids, feats, anc = data[i]
            chosen = anc[torch.randperm(len(anc))[:16]]
            ctxs.append(context(model, feats[: int(chosen.max())]))
            which.append(torch.full((len(chosen),), j))
            anchors.append(chosen)
            tokens.append(ids[chosen])
            labels.append(torch.stack([ids[a + 1 : a + block] for a in chosen.tolist()]))
        anchors_t = torch.cat(anchors)
        x = model.embed_block(embed, torch.cat(tokens))
        hidden = block_hidden(model, ctxs, torch.cat(which), anchors_t, x)
        logits = model_mod.block_logits(cfg, hidden, lm_head)
        labels_t = torch.cat(labels)
        ce = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), labels_t.reshape(-1), reduction="none"
        )
        loss = (ce.view(labels_t.shape) * pos_w).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0 or step == steps - 1:
            acc1 = (logits[:, 0].argmax(-1) == labels_t[:, 0]).float().mean().item()
            log.append((step, loss.item(), acc1))
            print(f"  step {step:4d} loss {loss.item():.3f} acc@1 {acc1:.2f}", flush=True)
    save_file(
        {k: v.detach().clone().contiguous() for k, v in weights.items()},
        str(drafter / "model.safetensors"),
    )
    return {"steps": steps, "seconds": time.monotonic() - t0, "log": log}


def run_harness(drafter: Path, cache: Path, out: Path) -> tuple[dict, list[dict]]:
    per_anchor = out.with_suffix(".anchors.jsonl")
    run_module(
        HARNESS,
        "--drafter", str(drafter), "--cache", str(cache), "--out", str(out),
        "--device", "cpu", "--dtype", "float32", "--topk", "1", "--budgets", "4",
        "--per-anchor", str(per_anchor),
    )  # fmt: skip
    rows = [json.loads(line) for line in per_anchor.read_text().splitlines()]
    return json.loads(out.read_text()), rows


def walk(streaks: dict[int, int], start: int, end: int, cut: bool) -> tuple[int, int, list[int]]:
    """Greedy decoding's path over anchors start..end with these per-anchor streaks:
    (blocks, tokens counted, per-block accepted drafts). ``cut``: a block keeps only the
    tokens up to ``end`` (the harness); otherwise it counts every accepted draft plus the
    bonus (vLLM's counters)."""
    a, blocks, counted, accepted = start, 0, 0, []
    while a < end:
        s = streaks[a]
        gain = min(s + 1, end - a)
        counted += gain if cut else s + 1
        accepted.append(s)
        blocks += 1
        a += gain
    return blocks, counted, accepted


def serve_and_measure(args, target: Path, drafter: Path, eval_ids, work: Path) -> list[dict]:
    log = work / "vllm.log"
    port = sv.free_port()
    spec = {
        "method": "dflash",
        "model": str(drafter),
        "num_speculative_tokens": args.block_size - 1,
    }
    cmd = [
        args.vllm, "serve", str(target),
        "--host", "127.0.0.1", "--port", str(port),
        "--speculative-config", json.dumps(spec),
        "--dtype", "float32", "--max-model-len", "512", "--max-num-seqs", "1",
        "--enforce-eager", "--served-model-name", "tiny",
        # each response carries its own accepted drafts per verify step
        "--per-request-spec-decode-metrics", "detailed",
    ]  # fmt: skip
    env = dict(os.environ)
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_TARGET_DEVICE="cpu",
        VLLM_CPU_KVCACHE_SPACE="1",
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
    )
    shim = work / "shim"
    shim.mkdir(exist_ok=True)
    (shim / "sitecustomize.py").write_text(sv._HIDE)
    env["PYTHONPATH"] = str(shim)
    env.pop("VIRTUAL_ENV", None)
    t_start = time.monotonic()
    with open(log, "wb") as logf:
        proc = subprocess.Popen(
            cmd, stdout=logf, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    base = f"http://127.0.0.1:{port}"
    out = []
    try:
        while True:
            if proc.poll() is not None:
                print("\n".join(log.read_text(errors="replace").splitlines()[-40:]))
                raise SystemExit(f"vllm serve exited with {proc.returncode} before it was ready")
            try:
                sv.http(base + "/health", timeout=2)
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            if time.monotonic() - t_start > args.startup_timeout:
                print("\n".join(log.read_text(errors="replace").splitlines()[-40:]))
                raise SystemExit("vllm serve not ready in time")
            time.sleep(1.0)
        print(f"vLLM ready in {time.monotonic() - t_start:.0f} s")

        def counters() -> dict[str, float]:
            # the last step's stats may reach the logger after the response: read until stable
            prev = None
            for _ in range(50):
                cur = sv.spec_counters(sv.http(base + "/metrics"))
                if cur == prev:
                    return cur
                prev = cur
                time.sleep(0.2)
            return cur

        before = counters()
        for ids in eval_ids:
            r = json.loads(sv.http(base + "/v1/completions", {
                "model": "tiny", "prompt": ids, "max_tokens": args.max_tokens,
                "temperature": 0, "ignore_eos": True, "return_token_ids": True,
            }))  # fmt: skip
            after = counters()

            def d(name: str, a=after, b=before) -> float:
                return a.get(name, 0.0) - b.get(name, 0.0)

            per_pos = [
                d(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}}')
                for i in range(args.block_size - 1)
            ]
            out.append({
                "token_ids": r["choices"][0]["token_ids"],
                "drafts": d("vllm:spec_decode_num_drafts_total"),
                "draft_tokens": d("vllm:spec_decode_num_draft_tokens_total"),
                "accepted": d("vllm:spec_decode_num_accepted_tokens_total"),
                "per_pos": per_pos,
                "per_request": (r.get("metrics") or {}).get("speculative_decoding"),
            })  # fmt: skip
            before = after
        return out
    finally:
        sv.stop_server(proc)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vllm", default="/tmp/vllmenv/bin/vllm", help="vLLM's CPU venv's CLI")
    ap.add_argument("--block-size", type=int, default=8, help="B; vLLM drafts B - 1 tokens")
    ap.add_argument("--max-tokens", type=int, default=64, help="max_tokens = --max-new-tokens")
    ap.add_argument("--steps", type=int, default=400, help="drafter training steps")
    ap.add_argument("--train-prompts", type=int, default=160)
    ap.add_argument(
        "--k-norm",
        choices=("tied", "free"),
        default="tied",
        help="tied: one k_norm weight for every drafter layer, which vLLM's CPU build "
        "computes correctly; free: one per layer, which it does not (it uses layer 0's "
        "for the context keys of every layer)",
    )
    ap.add_argument("--train-new-tokens", type=int, default=48)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--target-std", type=float, default=0.1, help="the target layers' weights")
    ap.add_argument("--startup-timeout", type=float, default=900.0)
    ap.add_argument("--workdir", type=Path, default=None, help="keep models, caches, logs here")
    args = ap.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # progress lines as they come, also into a file
    import torch

    torch.set_num_threads(2)
    B, max_tokens = args.block_size, args.max_tokens
    work = args.workdir or Path(tempfile.mkdtemp(prefix="served_vs_greedy_"))
    work.mkdir(parents=True, exist_ok=True)
    target, drafter = work / "target", work / "drafter"
    t0 = time.monotonic()
    build_target(target, args.seed, args.target_std)
    synthetic = importlib.import_module(SYNTHETIC)
    synthetic.write_drafter(
        drafter, hidden_size=sv.HIDDEN, num_layers=2, num_heads=sv.HEADS,
        num_kv_heads=sv.KV_HEADS, head_dim=sv.HEAD_DIM, intermediate_size=256,
        vocab_size=sv.VOCAB, block_size=B, target_layer_ids=LAYER_IDS,
        num_target_layers=sv.TARGET_LAYERS, seed=args.seed + 1,
    )  # fmt: skip
    train_ids = prompts(args.train_prompts, args.seed + 10, 4, 16)
    eval_ids = prompts(N_EVAL, args.seed + 20, 5, 12)
    write_prompts(work / "train.jsonl", train_ids, "train")
    names = write_prompts(work / "eval.jsonl", eval_ids, "p")
    build_cache(target, work / "train.jsonl", work / "cache_train", args.train_new_tokens)
    print(f"target + training cache in {time.monotonic() - t0:.0f} s; training the drafter")
    tied = args.k_norm == "tied"
    info = train_drafter(drafter, work / "cache_train", B, args.steps, args.seed, tied)
    print(f"trained {info['steps']} steps in {info['seconds']:.0f} s")

    build_cache(target, work / "eval.jsonl", work / "cache_eval", max_tokens)
    build_cache(target, work / "eval.jsonl", work / "cache_long", max_tokens + B)
    results, anchors = run_harness(drafter, work / "cache_eval", work / "eval_results.json")
    _, long_anchors = run_harness(drafter, work / "cache_long", work / "long_results.json")
    _, eval_samples = read_cache(work / "cache_eval")
    _, long_samples = read_cache(work / "cache_long")

    served = serve_and_measure(args, target, drafter, eval_ids, work)

    # ---- the table
    rows = []
    for i, name in enumerate(names):
        ids = eval_samples[name]["input_ids"].tolist()
        p = len(eval_ids[i])
        cont = ids[p:]
        assert ids[:p] == eval_ids[i] and len(cont) == max_tokens, (name, len(cont))
        long_cont = long_samples[name]["input_ids"].tolist()[p:]
        assert long_cont[:max_tokens] == cont, f"{name}: the longer build diverged"
        s = served[i]
        vtoks = s["token_ids"]
        same = vtoks == cont
        first_tok = (
            None
            if same
            else next(
                (j for j, (a, b) in enumerate(zip(vtoks, cont, strict=False)) if a != b),
                min(len(vtoks), len(cont)),
            )
        )
        task = results["tasks"][name]
        # the harness's streaks per anchor: this cache's (cut at its end) and the longer one's
        short = {r["anchor"]: r["streak_top1"] for r in anchors if r["name"] == name}
        longs = {r["anchor"]: r["streak_top1"] for r in long_anchors if r["name"] == name}
        end = p + max_tokens - 1
        nb, gen, _ = walk(short, p, end, cut=True)
        assert (nb, gen) == (task["n_blocks"], task["n_generated"]), (name, nb, gen, task)
        lb, lcount, lacc = walk(longs, p, end, cut=False)
        # vLLM's own blocks, one by one, against the harness's streak where vLLM drafted
        steps = (s["per_request"] or {}).get("per_step_accepted") or []
        first_block, n_differ, a = None, 0, p
        for j, acc in enumerate(steps):
            if longs.get(a) != acc:
                n_differ += 1
                if first_block is None:
                    first_block = (j, a, acc, longs.get(a))
            a += acc + 1
        rows.append({
            "name": name, "same": same, "first_tok": first_tok, "drafts": s["drafts"],
            "accepted": s["accepted"], "vlen": 1 + s["accepted"] / s["drafts"],
            "tau": task["tau_greedy"], "blocks": nb, "gen": gen, "uncut_acc": sum(lacc),
            "uncut": lcount / lb, "over": lcount - gen, "first_block": first_block,
            "n_differ": n_differ, "steps": steps,
            "per_request_ok": sum(steps) == s["accepted"] and len(steps) == s["drafts"],
        })  # fmt: skip

    print()
    hdr = (
        f"{'prompt':6} {'tokens=cache':>12} {'vLLM':>7} {'drafts':>6} {'acc':>4} "
        f"{'tau_greedy':>10} {'blocks':>6} {'gen':>4} {'diff':>7} {'uncut':>7} {'past end':>8}"
    )
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        same = "yes" if r["same"] else f"no @{r['first_tok']}"
        diff = r["vlen"] - r["tau"]
        diff = 0.0 if abs(diff) < 1e-9 else diff
        print(
            f"{r['name']:6} {same:>12} {r['vlen']:7.4f} {r['drafts']:6.0f} {r['accepted']:4.0f} "
            f"{r['tau']:10.4f} {r['blocks']:6d} {r['gen']:4d} {diff:+7.4f} "
            f"{r['uncut']:7.4f} {r['over']:8d}"
        )
    drafts = sum(r["drafts"] for r in rows)
    acc = sum(r["accepted"] for r in rows)
    blocks = sum(r["blocks"] for r in rows)
    gen = sum(r["gen"] for r in rows)
    uncut_acc = sum(r["uncut_acc"] for r in rows)
    over = sum(r["over"] for r in rows)
    v_suite, h_suite = 1 + acc / drafts, results["metrics"]["tau_greedy"]
    print("-" * len(hdr))
    print(
        f"{'suite':6} {'':>12} {v_suite:7.4f} {drafts:6.0f} {acc:4.0f} {h_suite:10.4f} "
        f"{blocks:6d} {gen:4d} {v_suite - h_suite:+7.4f} {1 + uncut_acc / blocks:7.4f} {over:8d}"
    )
    print()
    print("vLLM = 1 + accepted/drafts (counter deltas per request); tau_greedy = gen/blocks;")
    print("uncut = 1 + accepted/blocks on the harness's path with the last block not cut at")
    print("max_tokens (streaks from the longer cache); past end = tokens that adds.")
    print(
        f"suite: vLLM 1 + {acc:.0f}/{drafts:.0f} = {v_suite:.4f}; harness {gen}/{blocks} = "
        f"{h_suite:.4f}; tau_top1 (every anchor) {results['metrics']['tau_top1']:.4f}"
    )
    print(f"drafter k_norm weights: {args.k_norm}")
    checks = {
        "vLLM's token ids == the cache's continuation, every prompt": all(r["same"] for r in rows),
        "per-request metrics == counter deltas, every prompt": all(
            r["per_request_ok"] for r in rows
        ),
        "vLLM drafts == harness blocks, every prompt": all(
            r["drafts"] == r["blocks"] for r in rows
        ),
        "vLLM accepted == harness streaks on the path (uncut), every prompt": all(
            r["accepted"] == r["uncut_acc"] for r in rows
        ),
        "every vLLM block == the harness's streak at its anchor": all(
            r["first_block"] is None for r in rows
        ),
    }
    for what, ok in checks.items():
        print(f"  {'yes' if ok else 'NO '}  {what}")
    n_steps = sum(len(r["steps"]) for r in rows)
    n_differ = sum(r["n_differ"] for r in rows)
    print(
        f"  vLLM blocks whose acceptance differs from the harness's streak there: {n_differ} of {n_steps}"
    )
    (work / "served.json").write_text(json.dumps(served) + "\n")
    for r in rows:
        if r["first_block"] is not None:
            j, a, got, want = r["first_block"]
            print(
                f"  {r['name']}: first differing block {j} (anchor {a}): vLLM accepted {got}, "
                f"the harness's streak_top1 there is {want}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
