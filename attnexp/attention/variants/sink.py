"""A learned attention sink in the softmax denominator ("softmax off by one" with a learned logit
per head), as in gpt-oss (OpenAI 2025, gpt-oss model card §2.2: "each attention head has a learned
bias in the denominator of the softmax, similar to off-by-one attention") and Miller 2023,
"Attention Is Off By One":

    w_ij = exp(s_ij) / (exp(sink_h) + sum_{k allowed} exp(s_ik))

A row sums to 1 - exp(sink_h) / (exp(sink_h) + sum_k exp(s_ik)) < 1: the rest goes to no token,
so a head that has nothing to attend to need not dump its mass on the first token. With
sink_h = -inf it is plain softmax attention.

The sink logits start at 0 (exp(0) = 1: at first the sink weighs as much as one key with score 0).
gpt-oss's released weights are loaded, not initialised, and its Hugging Face port draws fresh
ones from N(0, 0.02²); both start a head near "one extra key", so we keep a deterministic 0.
tests/unit/attention/test_reference_implementations.py checks this layer against a transcription of gpt-oss's
`sdpa` with sinks.

Backends: eager appends the sink as an extra score column; sdpa appends it as an extra key whose
score is sink_h for every query (an extra feature: q gets a constant 1, real keys 0, the sink key
sink_h / scale; its value is 0); flex rescales the plain output by exp(lse) / (exp(lse) + exp(sink_h))
= sigmoid(lse - sink_h), with lse FlexAttention's own log-sum-exp of the row.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from attnexp.attention.kernels import flex, repeat_kv
from attnexp.attention.registry import register
from attnexp.attention.variants.mha import MultiHead


@register
class SinkAttention(MultiHead):
    name = "sink"
    summary = "softmax with a learned per-head sink logit in the denominator (off-by-one, gpt-oss)"
    rows = "at most 1"

    def __init__(self, d_model, n_heads, cfg):
        super().__init__(d_model, n_heads, cfg)
        self.sink_H = nn.Parameter(torch.zeros(n_heads))

    def kernel(self, q, k, v, mask, need_weights, bias):
        B, H, T, Dq = q.shape
        scale = 1.0 / math.sqrt(Dq)
        sink = self.sink_H.to(q.dtype)
        drop = self.cfg.dropout if self.training else 0.0
        if self.backend == "flex" and not need_weights:
            out, lse = flex(q, k, v, mask, scale=scale, dropout_p=self.cfg.dropout, training=self.training, return_lse=True)
            return out * torch.sigmoid(lse.to(q.dtype) - sink[None, :, None])[..., None], None
        k, v = repeat_kv(k, v, H)
        allowed = mask.allowed(T, q.device)
        if self.backend == "sdpa" and not need_weights:
            one, zero = q.new_ones(B, H, T, 1), q.new_zeros(B, H, T, 1)
            q1, k1 = torch.cat([q, one], -1), torch.cat([k, zero], -1)
            k_sink = torch.cat([q.new_zeros(B, H, 1, Dq), (sink / scale)[None, :, None, None].expand(B, H, 1, 1)], -1)
            k1, v1 = torch.cat([k1, k_sink], 2), torch.cat([v, v.new_zeros(B, H, 1, v.shape[-1])], 2)
            keep = torch.cat([allowed.expand(B, 1, T, T), allowed.new_ones(B, 1, T, 1)], -1)
            return F.scaled_dot_product_attention(q1, k1, v1, attn_mask=keep, dropout_p=drop, scale=scale), None
        scores = (q @ k.transpose(-2, -1)) * scale
        scores = scores.masked_fill(~allowed, float("-inf"))
        with_sink = torch.cat([scores, sink[None, :, None, None].expand(B, H, T, 1)], -1)
        w = torch.softmax(with_sink, -1)[..., :T]
        p = F.dropout(w, drop, True) if drop > 0 else w
        return p @ v, (w if need_weights else None)
