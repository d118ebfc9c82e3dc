"""The score/softmax kernel shared by the softmax variants, on three backends.

Shapes: q (B, H, T, D); k, v (B, G, T, D) with H % G == 0 (G < H is grouped-query attention).
`eager` materializes the weights; `sdpa` calls F.scaled_dot_product_attention (flash / memory-
efficient kernels where the mask allows); `flex` calls FlexAttention (compiled on CUDA; on CPU it
runs forward-only). Asking for weights always takes the eager path on the same tensors, so the
maps logged for a model trained on a fused kernel come from the very same parameters.

A variant that changes the scores (ALiBi's distance penalty, a data-dependent decay) hands the
kernel a `ScoreBias`: the same additive bias as a dense tensor (eager, sdpa) and as a
FlexAttention `score_mod`, so a new positional scheme needs no change here.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from functools import cache
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import Tensor

from attnexp.attention.masking import MaskSpec

BACKENDS = ("eager", "sdpa", "flex")


class ScoreBias(Protocol):
    def dense(self, T: int) -> Tensor:
        """Additive bias broadcastable to (B, H, T, T), float32."""

    def score_mod(self) -> Callable:
        """The same bias as a FlexAttention score_mod(score, b, h, q_idx, kv_idx)."""


def repeat_kv(k: Tensor, v: Tensor, H: int) -> tuple[Tensor, Tensor]:
    """(B, G, T, D) keys/values shared by groups of query heads -> one per query head (B, H, T, D)."""
    G = k.shape[1]
    return (k, v) if G == H else (k.repeat_interleave(H // G, dim=1), v.repeat_interleave(H // G, dim=1))


def softmax_weights(q, k, mask: MaskSpec, *, scale, bias: Tensor | None = None) -> Tensor:
    """The eager path's post-softmax weights (B,H,T,T), for keys already one per query head; for
    a variant that combines maps before it multiplies V (differential)."""
    T = q.shape[2]
    scores = (q @ k.transpose(-2, -1)) * scale
    if bias is not None:
        scores = scores + bias.to(scores.dtype)  # a float32 bias must not upcast bf16 scores
    additive = torch.zeros((), dtype=scores.dtype, device=scores.device).masked_fill(
        ~mask.allowed(T, q.device), float("-inf")
    )
    return torch.softmax(scores + additive, dim=-1)


def eager(q, k, v, mask: MaskSpec, *, scale, bias: Tensor | None = None, dropout_p=0.0, training=False):
    """Reference path: returns (out (B,H,T,D), post-softmax weights (B,H,T,T))."""
    k, v = repeat_kv(k, v, q.shape[1])
    weights = softmax_weights(q, k, mask, scale=scale, bias=bias)
    probs = F.dropout(weights, dropout_p, training) if dropout_p > 0 else weights
    return probs @ v, weights


def eager_weighted(q, k, v, weigh: Callable[[Tensor], Tensor], *, dropout_p=0.0, training=False,
                   need_weights=False) -> tuple[Tensor, Tensor | None]:
    """Eager attention whose rows are not a softmax (sigmoid, softpick): `weigh` turns the scaled
    scores (B, H, T, T) into the weights, masking included; returns (weights @ v, weights | None)."""
    k, v = repeat_kv(k, v, q.shape[1])
    w = weigh((q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1]))
    p = F.dropout(w, dropout_p, training) if dropout_p > 0 else w
    return p @ v, (w if need_weights else None)


def sdpa(q, k, v, mask: MaskSpec, *, scale, bias: Tensor | None = None, dropout_p=0.0, training=False):
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


FLEX_SHAPES = 64


@cache
def _flex_fn(device_type: str):
    from torch.nn.attention.flex_attention import flex_attention

    if device_type == "cuda":
        # One graph per shape (dynamic=False): batch lengths are rounded so there are few, but a run
        # sees (lengths x batch sizes x train/eval) of them, and past Dynamo's recompile_limit (8)
        # flex_attention silently runs uncompiled, the dense reference path: 18x slower on an H100
        # (the kernel grid's flex rows in its first GPU run), with T x T memory. 64 shapes suffice.
        import torch._dynamo.config as dynamo

        dynamo.recompile_limit = max(dynamo.recompile_limit, FLEX_SHAPES)
        return torch.compile(flex_attention, dynamic=False)
    return flex_attention  # CPU: unfused reference implementation, forward only


def flex(q, k, v, mask: MaskSpec, *, scale, score_mod=None, dropout_p=0.0, training=False, return_lse=False):
    """FlexAttention's output (B, H, T, Dv), and with return_lse its log-sum-exp of each row's
    scores (B, H, T) in natural log."""
    if dropout_p > 0 and training:
        raise ValueError("FlexAttention has no attention dropout; set attention.dropout=0 or use backend sdpa")
    aux = None
    if return_lse:
        from torch.nn.attention.flex_attention import AuxRequest

        aux = AuxRequest(lse=True)
    dv = v.shape[-1]
    q, k, v = (_at_least(t, FLEX_MIN_HEAD_DIM) for t in (q, k, v))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")
        out = _flex_fn(q.device.type)(
            q, k, v, score_mod=score_mod, block_mask=mask.block_mask(q.shape[2], q.device),
            scale=scale, enable_gqa=k.shape[1] != q.shape[1], return_aux=aux,
        )
    if return_lse:
        return out[0][..., :dv], out[1].lse
    return out[..., :dv]


# Compiled FlexAttention (Inductor's kernel) refuses head dims under 16 ("NYI: embedding dimension
# ... must be at least 16", torch 2.11 on an H100): small models (d_model=64, 8 heads) could not train
# on it. Zeros appended to q and k leave every score q·k unchanged (the scale is passed explicitly),
# and zeros appended to v add output columns that are cut off again; done on every device, so the
# CPU tests run the very path a GPU does.
FLEX_MIN_HEAD_DIM = 16


def _at_least(t: Tensor, d: int) -> Tensor:
    return t if t.shape[-1] >= d else F.pad(t, (0, d - t.shape[-1]))


def attend(q, k, v, mask: MaskSpec, *, backend: str, bias: ScoreBias | None = None, dropout_p: float = 0.0,
           training: bool = False, need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
    """Softmax attention on the chosen backend; weights only when asked (then always eager)."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    if backend == "flex" and not need_weights:
        out = flex(q, k, v, mask, scale=scale, score_mod=None if bias is None else bias.score_mod(),
                   dropout_p=dropout_p, training=training)
        return out, None
    dense = None if bias is None else bias.dense(q.shape[2])
    if need_weights or backend == "eager":
        out, w = eager(q, k, v, mask, scale=scale, bias=dense, dropout_p=dropout_p, training=training)
        return out, (w if need_weights else None)
    if backend == "sdpa":
        return sdpa(q, k, v, mask, scale=scale, bias=dense, dropout_p=dropout_p, training=training), None
    raise ValueError(f"Unknown backend: {backend!r}; choose one of {', '.join(BACKENDS)}")
