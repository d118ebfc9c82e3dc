"""The score/softmax kernel shared by the softmax variants, on three backends.

Shapes: q (B, H, T, D); k, v (B, G, T, D) with H % G == 0 (G < H is grouped-query attention).
`eager` materializes the weights; `sdpa` calls F.scaled_dot_product_attention (flash / memory-
efficient kernels where the mask allows); `flex` calls FlexAttention (compiled on CUDA; on CPU it
runs forward-only). Asking for weights always takes the eager path on the same tensors, so the
maps logged for a model trained on a fused kernel come from the very same parameters.
"""

from __future__ import annotations

import math
import warnings
from functools import lru_cache

import torch
import torch.nn.functional as F
from torch import Tensor

from attnexp.attention.masking import MaskSpec

BACKENDS = ("eager", "sdpa", "flex")


def alibi_bias(slopes_H: Tensor, T: int) -> Tensor:
    """(1, H, T, T) additive bias -slope_h * |i - j| (ALiBi, Press et al. 2022)."""
    pos = torch.arange(T, device=slopes_H.device)
    dist = (pos[:, None] - pos[None, :]).abs().to(slopes_H.dtype)
    return (-slopes_H[:, None, None] * dist)[None]


def eager(q, k, v, mask: MaskSpec, *, scale, bias=None, dropout_p=0.0, training=False):
    """Reference path: returns (out (B,H,T,D), post-softmax weights (B,H,T,T))."""
    H, G, T = q.shape[1], k.shape[1], q.shape[2]
    if G != H:
        k, v = k.repeat_interleave(H // G, dim=1), v.repeat_interleave(H // G, dim=1)
    scores = (q @ k.transpose(-2, -1)) * scale
    if bias is not None:
        scores = scores + bias.to(scores.dtype)  # float32 slopes must not upcast bf16 scores
    additive = torch.zeros((), dtype=scores.dtype, device=scores.device).masked_fill(
        ~mask.allowed(T, q.device), float("-inf")
    )
    weights = torch.softmax(scores + additive, dim=-1)
    probs = F.dropout(weights, dropout_p, training) if dropout_p > 0 else weights
    return probs @ v, weights


def sdpa(q, k, v, mask: MaskSpec, *, scale, bias=None, dropout_p=0.0, training=False):
    T = q.shape[2]
    drop = dropout_p if training else 0.0
    gqa = k.shape[1] != q.shape[1]
    if bias is None and mask.is_plain_causal:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=drop, scale=scale, enable_gqa=gqa)
    if bias is None and mask.is_full:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=drop, scale=scale, enable_gqa=gqa)
    attn_mask = mask.allowed(T, q.device)
    if bias is not None:
        attn_mask = bias.to(q.dtype).masked_fill(~attn_mask, float("-inf"))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=drop, scale=scale, enable_gqa=gqa)


@lru_cache(maxsize=None)
def _flex_fn(device_type: str):
    from torch.nn.attention.flex_attention import flex_attention

    if device_type == "cuda":
        return torch.compile(flex_attention, dynamic=False)
    return flex_attention  # CPU: unfused reference implementation, forward only


def flex(q, k, v, mask: MaskSpec, *, scale, slopes_H=None, dropout_p=0.0, training=False):
    if dropout_p > 0 and training:
        raise ValueError("FlexAttention has no attention dropout; set attention.dropout=0 or use backend sdpa")
    score_mod = None
    if slopes_H is not None:
        def score_mod(score, b, h, q_idx, kv_idx):
            return score - slopes_H[h] * (q_idx - kv_idx).abs()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")
        return _flex_fn(q.device.type)(
            q, k, v, score_mod=score_mod, block_mask=mask.block_mask(q.shape[2], q.device),
            scale=scale, enable_gqa=k.shape[1] != q.shape[1],
        )


def attend(q, k, v, mask: MaskSpec, *, backend: str, slopes_H: Tensor | None = None, dropout_p: float = 0.0,
           training: bool = False, need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
    """Softmax attention on the chosen backend; weights only when asked (then always eager)."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    bias = None if slopes_H is None else alibi_bias(slopes_H, q.shape[2])
    if need_weights or backend == "eager":
        out, w = eager(q, k, v, mask, scale=scale, bias=bias, dropout_p=dropout_p, training=training)
        return out, (w if need_weights else None)
    if backend == "sdpa":
        return sdpa(q, k, v, mask, scale=scale, bias=bias, dropout_p=dropout_p, training=training), None
    if backend == "flex":
        return flex(q, k, v, mask, scale=scale, slopes_H=slopes_H, dropout_p=dropout_p, training=training), None
    raise ValueError(f"Unknown backend: {backend!r}; choose one of {', '.join(BACKENDS)}")
