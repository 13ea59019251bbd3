"""The DFlash drafter block forward (docs/design.md "The block forward"), batched over anchors.

Two facts make the batched form cheap:

* the context of anchor ``a`` is ``hidden_norm(fc(hidden_states[0:a]))`` at
  positions ``0..a-1``, a prefix of the same projection over the whole sample,
  and every layer projects that context with its own k/v weights only. So
  each layer's context keys and values are computed once per sample
  (:meth:`DrafterModel.context`) and each anchor attends to a prefix of them,
  cut by the attention mask;
* grouped-query attention shares one key/value head among ``g`` query heads
  whose mask is identical, so the ``g`` heads are folded into the query length
  and SDPA runs on the unexpanded keys.

Anchors are padded to the batch's longest context; the explicit boolean mask
hides padding, context keys at or after the anchor, keys outside a sliding
window, and, in layers the run's semantics makes causal, block keys after the
query (:mod:`.attention`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .attention import Attention, resolve_attention
from .drafter import SLIDING, DrafterConfig


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm computed in float32 (``x * rsqrt(mean(x^2) + eps) * weight``), cast back."""
    xf = x.float()
    out = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
    return out.to(x.dtype)


def rope_cos_sin(
    positions: torch.Tensor, head_dim: int, theta: float, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables ``[..., head_dim]`` for rotate-half RoPE at ``positions``."""
    exponent = torch.arange(0, head_dim, 2, device=positions.device, dtype=torch.float32) / head_dim
    inv_freq = 1.0 / (theta**exponent)
    freqs = positions.to(torch.float32)[..., None] * inv_freq
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE; ``cos``/``sin`` broadcast over the head axis."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


@dataclass
class ContextKV:
    """One sample's context keys and values per layer, ``[kv_heads, n, head_dim]`` each."""

    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    length: int


class DrafterModel:
    """Drafter weights on one device, with the batched block forward."""

    def __init__(
        self,
        cfg: DrafterConfig,
        weights: dict[str, torch.Tensor],
        attention: Attention | None = None,
    ):
        self.cfg = cfg
        self.attention = attention or resolve_attention(cfg.causal, cfg.causal_key, None)
        self.w = weights
        first = weights["norm.weight"]
        self.device, self.dtype = first.device, first.dtype
        self.groups = cfg.num_heads // cfg.num_kv_heads

    def _linear(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return F.linear(x, self.w[f"{name}.weight"], self.w.get(f"{name}.bias"))

    @torch.inference_mode()
    def context(self, features: torch.Tensor) -> ContextKV:
        """Project target features ``[n, n_layers*H]`` once and build every layer's K/V.

        Positions are ``0..n-1``; an anchor ``a`` later uses the first ``a`` of them.
        """
        cfg = self.cfg
        n, d, kv = features.shape[0], cfg.head_dim, cfg.num_kv_heads
        feats = features.to(device=self.device, dtype=self.dtype)
        ctx = rms_norm(
            F.linear(feats, self.w["fc.weight"]), self.w["hidden_norm.weight"], cfg.rms_norm_eps
        )
        cos, sin = rope_cos_sin(torch.arange(n, device=self.device), d, cfg.rope_theta, self.dtype)
        keys, values = [], []
        for i in range(cfg.num_layers):
            a = f"layers.{i}.self_attn"
            k = rms_norm(
                self._linear(ctx, f"{a}.k_proj").view(n, kv, d),
                self.w[f"{a}.k_norm.weight"],
                cfg.rms_norm_eps,
            )
            k = apply_rope(k, cos[:, None, :], sin[:, None, :])
            v = self._linear(ctx, f"{a}.v_proj").view(n, kv, d)
            keys.append(k.transpose(0, 1).contiguous())
            values.append(v.transpose(0, 1).contiguous())
        return ContextKV(keys, values, n)

    def embed_block(self, embed: torch.Tensor, anchor_tokens: torch.Tensor) -> torch.Tensor:
        """Block input ``[anchor, MASK x (B-1)]`` embedded with the target's table: ``[N, B, H]``.

        ``embed`` may stay on the CPU; only the rows used are moved.
        """
        cfg = self.cfg
        n = anchor_tokens.shape[0]
        ids = torch.full((n, cfg.block_size), cfg.mask_token_id, dtype=torch.long)
        ids[:, 0] = anchor_tokens.cpu()
        x = embed[ids.to(embed.device)].to(device=self.device, dtype=self.dtype)
        if cfg.input_embedding_scale is not None:
            x = x * cfg.input_embedding_scale
        return x

    def _masks(self, anchors: torch.Tensor, ctx_len: int) -> dict[str, torch.Tensor]:
        """Boolean masks ``[N, 1, g*B, ctx_len+B]`` per layer type (True = may attend).

        Context keys: strictly before the anchor. Block keys: all of them, or those
        at or before the query when the layer type is causal (:mod:`.attention`).
        ``sliding_attention`` layers also keep only keys with
        ``|query_position - key_position| < sliding_window``.
        """
        cfg, att = self.cfg, self.attention
        b, dev = cfg.block_size, self.device
        n = anchors.shape[0]
        q_off = torch.arange(b, device=dev)
        q_pos = anchors[:, None, None] + q_off[None, :, None]  # [N, B, 1]
        ctx_pos = torch.arange(ctx_len, device=dev)[None, None, :]  # [1, 1, L]
        ctx_vis = (ctx_pos < anchors[:, None, None]).expand(n, b, ctx_len)  # strictly before anchor
        rel = q_off[:, None] - q_off[None, :]  # query minus key, inside the block
        masks = {}
        for kind in dict.fromkeys(cfg.layer_types):
            block_vis = rel >= 0 if att.causal(kind) else torch.ones_like(rel, dtype=torch.bool)
            ctx = ctx_vis
            if kind == SLIDING:
                w = cfg.sliding_window
                assert w is not None
                block_vis = block_vis & (rel.abs() < w)
                ctx = ctx_vis & (ctx_pos > q_pos - w)
            masks[kind] = torch.cat([ctx, block_vis.expand(n, b, b)], -1)
        return {k: m[:, None].repeat(1, 1, self.groups, 1) for k, m in masks.items()}

    @torch.inference_mode()
    def block_hidden(
        self,
        contexts: Sequence[ContextKV],
        which: torch.Tensor,
        anchors: torch.Tensor,
        x: torch.Tensor,
    ) -> torch.Tensor:
        """Final hidden states of block positions 1..B-1, ``[N, B-1, H]``.

        ``which[i]`` selects anchor i's sample in ``contexts`` and ``anchors[i]``
        its position; each context must hold at least ``anchors[i]`` positions.
        ``x`` is :meth:`embed_block`'s output.
        """
        cfg = self.cfg
        n, b = x.shape[:2]
        d, kv, g, hq = cfg.head_dim, cfg.num_kv_heads, self.groups, cfg.num_heads
        anchors = anchors.to(self.device)
        which = which.to(self.device)
        ctx_len = int(anchors.max()) if n else 0
        masks = self._masks(anchors, ctx_len)
        cos, sin = rope_cos_sin(
            anchors[:, None] + torch.arange(b, device=self.device), d, cfg.rope_theta, self.dtype
        )
        cos, sin = cos[:, :, None, :], sin[:, :, None, :]
        eps = cfg.rms_norm_eps
        for i in range(cfg.num_layers):
            a, m = f"layers.{i}.self_attn", f"layers.{i}.mlp"
            h = rms_norm(x, self.w[f"layers.{i}.input_layernorm.weight"], eps)
            q = rms_norm(
                self._linear(h, f"{a}.q_proj").view(n, b, hq, d), self.w[f"{a}.q_norm.weight"], eps
            )
            k = rms_norm(
                self._linear(h, f"{a}.k_proj").view(n, b, kv, d), self.w[f"{a}.k_norm.weight"], eps
            )
            v = self._linear(h, f"{a}.v_proj").view(n, b, kv, d)
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
            k_ctx, v_ctx = self._gather_context(contexts, which, i, ctx_len, n)
            keys = torch.cat([k_ctx, k.transpose(1, 2)], dim=2)
            vals = torch.cat([v_ctx, v.transpose(1, 2)], dim=2)
            # fold the g query heads sharing a kv head into the query axis (index g_i*B + b_i)
            qf = q.view(n, b, kv, g, d).permute(0, 2, 3, 1, 4).reshape(n, kv, g * b, d)
            out = F.scaled_dot_product_attention(
                qf, keys, vals, attn_mask=masks[cfg.layer_types[i]], scale=d**-0.5
            )
            out = out.view(n, kv, g, b, d).permute(0, 3, 1, 2, 4).reshape(n, b, hq * d)
            x = x + self._linear(out, f"{a}.o_proj")
            h = rms_norm(x, self.w[f"layers.{i}.post_attention_layernorm.weight"], eps)
            x = x + self._linear(
                F.silu(self._linear(h, f"{m}.gate_proj")) * self._linear(h, f"{m}.up_proj"),
                f"{m}.down_proj",
            )
        return rms_norm(x[:, 1:], self.w["norm.weight"], eps)

    def _gather_context(
        self, contexts: Sequence[ContextKV], which: torch.Tensor, layer: int, ctx_len: int, n: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Context K/V for each anchor, padded to ``ctx_len``: ``[N, kv, ctx_len, d]`` each."""
        if len(contexts) == 1:
            c = contexts[0]
            return (
                c.keys[layer][:, :ctx_len].unsqueeze(0).expand(n, -1, -1, -1),
                c.values[layer][:, :ctx_len].unsqueeze(0).expand(n, -1, -1, -1),
            )
        ks, vs = [], []
        for c in contexts:
            k, v = c.keys[layer][:, :ctx_len], c.values[layer][:, :ctx_len]
            pad = ctx_len - k.shape[1]
            if pad:  # a shorter sample: the mask never looks past its anchors
                k = F.pad(k, (0, 0, 0, pad))
                v = F.pad(v, (0, 0, 0, pad))
            ks.append(k)
            vs.append(v)
        return torch.stack(ks)[which], torch.stack(vs)[which]


def block_logits(cfg: DrafterConfig, hidden: torch.Tensor, lm_head: torch.Tensor) -> torch.Tensor:
    """Float32 logits ``[N, B-1, V]`` through the target's lm_head, multiplier and softcap."""
    logits = F.linear(hidden, lm_head).float()
    if cfg.output_multiplier is not None:
        logits = logits * cfg.output_multiplier
    cap = cfg.final_logit_softcapping
    if cap is not None and cap > 0:
        logits = torch.tanh(logits / cap) * cap
    return logits
