"""A deliberately plain reference for the harness: one anchor at a time, loops, float64.

It shares no code with the harness's forward or metrics: attention is written
per head and per query position with the visibility rules of docs/design.md "The block forward"
spelled out as ``if`` statements, RoPE rotates explicit pairs, ranks come from
sorting the vocabulary, and the DDTree is built with token-keyed child maps
the way the paper's code does. Slow on purpose; tiny checkpoints only.
"""

from __future__ import annotations

import functools
import heapq
import json
import math
from pathlib import Path

import torch
from safetensors import safe_open

Tensor = torch.Tensor


def _lookup(raw: dict, name: str, default=None):
    nested = raw.get("dflash_config") or {}
    return nested.get(name, raw.get(name, default))


def read_drafter(drafter_dir: Path) -> tuple[dict, dict[str, Tensor]]:
    """The raw config and every tensor (float64), from single or sharded files."""
    d = Path(drafter_dir)
    raw = json.loads((d / "config.json").read_text())
    files = (
        sorted(
            set(json.loads((d / "model.safetensors.index.json").read_text())["weight_map"].values())
        )
        if (d / "model.safetensors.index.json").exists()
        else ["model.safetensors"]
    )
    weights = {}
    for name in files:
        with safe_open(str(d / name), framework="pt") as f:
            for k in f.keys():  # noqa: SIM118 (safe_open is not a dict)
                weights[k] = f.get_tensor(k).double()
    return raw, weights


def read_cache(cache_dir: Path) -> tuple[Tensor, Tensor, list[tuple[str, dict[str, Tensor]]]]:
    """(embed, lm_head, [(name, sample tensors)]) in float64 / int64."""
    c = Path(cache_dir)
    man = json.loads((c / "manifest.json").read_text())

    def load(path: Path) -> dict[str, Tensor]:
        if path.suffix == ".pt":
            return torch.load(str(path), weights_only=True)
        with safe_open(str(path), framework="pt") as f:
            return {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118

    if "target" in man:
        t = c / man["target"]
        wm = json.loads((t / "model.safetensors.index.json").read_text())["weight_map"]
        embed = load(t / wm["model.embed_tokens.weight"])["model.embed_tokens.weight"]
        lm_head = load(t / wm["lm_head.weight"])["lm_head.weight"]
    else:
        head = load(c / man["head"])
        embed, lm_head = head["embed_tokens"], head["lm_head"]
    samples = [(s["name"], load(c / s["file"])) for s in man["samples"]]
    return embed.double(), lm_head.double(), samples


def rms(x: Tensor, w: Tensor, eps: float) -> Tensor:
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


@functools.lru_cache(maxsize=4096)
def _angles(pos: int, d: int, theta: float) -> tuple[Tensor, Tensor]:
    i = torch.arange(d // 2, dtype=torch.float64)
    ang = pos * theta ** (-(2 * i) / d)
    return ang.cos(), ang.sin()


def rope_vec(v: Tensor, pos: int, theta: float) -> Tensor:
    """Rotate each pair (i, i + d/2) of one head vector by the angle pos * theta^(-2i/d)."""
    d = v.shape[0]
    cos, sin = _angles(pos, d, theta)
    first, second = v[: d // 2], v[d // 2 :]
    return torch.cat([first * cos - second * sin, second * cos + first * sin])


def layer_is_causal(raw: dict, layer_type: str, sliding: str) -> bool:
    """Whether a layer hides block keys after the query.

    The config's own word first (top-level ``is_causal``, then
    ``dflash_config.causal``, as vLLM's resolver reads them), for every layer;
    else only sliding layers, and only under the ``causal`` semantics.
    """
    nested = raw.get("dflash_config") or {}
    for own in (raw.get("is_causal"), nested.get("causal"), nested.get("is_causal")):
        if own is not None:
            return bool(own)
    return layer_type == "sliding_attention" and sliding == "causal"


def may_attend(
    qpos: int, kpos: int, anchor: int, in_block: bool, causal: bool, window: int | None
) -> bool:
    """The visibility rules of docs/design.md "The block forward", one ``if`` per rule (window None: no window)."""
    if not in_block and kpos >= anchor:
        return False  # context: strictly before the anchor
    if in_block and causal and kpos > qpos:
        return False  # causal inside the block
    # outside the sliding window, on either side
    return window is None or abs(qpos - kpos) < window


def anchor_logits(
    raw: dict,
    w: dict[str, Tensor],
    embed: Tensor,
    lm_head: Tensor,
    sample: dict,
    a: int,
    sliding: str = "bidirectional",
) -> Tensor:
    """Logits [B-1, V] for the anchor at position a, computed the slow way."""
    hsz = raw["hidden_size"]
    nh, nkv = raw["num_attention_heads"], raw["num_key_value_heads"]
    d = raw.get("head_dim", hsz // nh)
    eps, theta = raw.get("rms_norm_eps", 1e-6), raw.get("rope_theta", 10000.0)
    bsz, mask_id = _lookup(raw, "block_size", 16), _lookup(raw, "mask_token_id")
    types = raw.get("layer_types") or ["full_attention"] * raw["num_hidden_layers"]
    window = raw.get("sliding_window")
    ids = sample["input_ids"].long()
    feats = sample["hidden_states"].double()

    ctx = rms(feats[:a] @ w["fc.weight"].T, w["hidden_norm.weight"], eps)  # [a, H]
    block_ids = [int(ids[a])] + [mask_id] * (bsz - 1)
    x = torch.stack([embed[t] for t in block_ids])
    if raw.get("input_embedding_scale") is not None:
        x = x * raw["input_embedding_scale"]
    positions = list(range(a)) + [a + i for i in range(bsz)]  # keys: context then block
    for li in range(raw["num_hidden_layers"]):
        p = f"layers.{li}."
        h = rms(x, w[p + "input_layernorm.weight"], eps)
        src = torch.cat([ctx, h])  # the same k/v projections for context and block
        keys, vals = [], []  # per kv head: one key and value per position
        for kvh in range(nkv):
            wk = w[p + "self_attn.k_proj.weight"][kvh * d : (kvh + 1) * d]
            wv = w[p + "self_attn.v_proj.weight"][kvh * d : (kvh + 1) * d]
            keys.append(
                [
                    rope_vec(
                        rms(src[j] @ wk.T, w[p + "self_attn.k_norm.weight"], eps),
                        positions[j],
                        theta,
                    )
                    for j in range(len(src))
                ]
            )
            vals.append([src[j] @ wv.T for j in range(len(src))])
        heads_out = []
        for qh in range(nh):
            kvh = qh // (nh // nkv)  # grouped-query attention
            wq = w[p + "self_attn.q_proj.weight"][qh * d : (qh + 1) * d]
            rows = []
            for qi in range(bsz):
                qpos = a + qi
                q = rope_vec(rms(h[qi] @ wq.T, w[p + "self_attn.q_norm.weight"], eps), qpos, theta)
                causal = layer_is_causal(raw, types[li], sliding)
                win = window if types[li] == "sliding_attention" else None
                allowed = [
                    j
                    for j, kpos in enumerate(positions)
                    if may_attend(qpos, kpos, a, j >= a, causal, win)
                ]
                k_rows = torch.stack([keys[kvh][j] for j in allowed])
                v_rows = torch.stack([vals[kvh][j] for j in allowed])
                probs = torch.softmax(k_rows @ q / math.sqrt(d), 0)
                rows.append(probs @ v_rows)
            heads_out.append(torch.stack(rows))
        attn = torch.cat(heads_out, dim=-1)  # [B, nh*d], head-major like q_proj
        x = x + attn @ w[p + "self_attn.o_proj.weight"].T
        n = rms(x, w[p + "post_attention_layernorm.weight"], eps)
        gate = n @ w[p + "mlp.gate_proj.weight"].T
        x = (
            x
            + ((gate * torch.sigmoid(gate)) * (n @ w[p + "mlp.up_proj.weight"].T))
            @ w[p + "mlp.down_proj.weight"].T
        )
    out = rms(x, w["norm.weight"], eps)[1:] @ lm_head.T
    if raw.get("output_multiplier") is not None:
        out = out * raw["output_multiplier"]
    cap = raw.get("final_logit_softcapping")
    if cap:
        out = torch.tanh(out / cap) * cap
    return out


def ranking(row: list[float]) -> list[int]:
    """Token ids by logit descending, ties to the lower id."""
    return sorted(range(len(row)), key=lambda t: (-row[t], t))


def reference_metrics(
    logits: Tensor, labels: list[int], topk: list[int], budgets: list[int]
) -> dict[str, float]:
    rows = logits.tolist()
    orders = [ranking(r) for r in rows]
    ranks = [orders[i].index(labels[i]) for i in range(len(labels))]
    out: dict[str, float] = {"acc": sum(r == 0 for r in ranks) / len(ranks)}
    for k in topk:
        s = 0
        while s < len(ranks) and ranks[s] < k:
            s += 1
        out[f"streak_top{k}"] = s
    out["tau_top1"] = out["streak_top1"] + 1
    logp = torch.log_softmax(logits.double(), -1).tolist()
    for b in budgets:
        out[f"ddtree_b{b}"] = ddtree_walk(logp, orders, labels, b)
    out["_ranks"] = ranks  # type: ignore[assignment]
    return out


def ddtree_walk(
    logp: list[list[float]], orders: list[list[int]], labels: list[int], budget: int
) -> int:
    """Build the budget-b DDTree with token-keyed children, then follow the labels."""
    width = min(budget, len(orders[0]))
    depth_limit = len(orders)
    children: list[dict[int, int]] = [{}]
    heap = [(-logp[0][orders[0][0]], (0,), 0, 0.0)]  # (-score, ranks, parent node, parent score)
    while heap and len(children) - 1 < budget:
        neg, ranks, parent, pscore = heapq.heappop(heap)
        depth, r = len(ranks), ranks[-1]
        token = orders[depth - 1][r]
        node = len(children)
        children.append({})
        children[parent][token] = node
        if r + 1 < width:
            heapq.heappush(
                heap,
                (
                    -(pscore + logp[depth - 1][orders[depth - 1][r + 1]]),
                    (*ranks[:-1], r + 1),
                    parent,
                    pscore,
                ),
            )
        if depth < depth_limit:
            heapq.heappush(heap, (-(-neg + logp[depth][orders[depth][0]]), (*ranks, 0), node, -neg))
    node, matched = 0, 0
    for label in labels:
        if label not in children[node]:
            break
        node = children[node][label]
        matched += 1
    return matched
