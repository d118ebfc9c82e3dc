"""Differential attention: Ye et al. 2024, "Differential Transformer" (ICLR 2025, arXiv:2410.05258).

Each head splits its query and key into two halves [Q1; Q2], [K1; K2] of width d = d_head / 2 and
takes the difference of two softmax maps over the same values V (width d_head):

    DiffAttn(X) = (softmax(Q1 K1^T / sqrt(d)) - lambda softmax(Q2 K2^T / sqrt(d))) V     (their eq. 1)
    lambda = exp(lq1 · lk1) - exp(lq2 · lk2) + lambda_init                               (their eq. 2)
    lambda_init = 0.8 - 0.6 exp(-0.3 (l - 1)),  l = the layer's index from 1           (their §2.1)
    head_i = (1 - lambda_init) RMSNorm(DiffAttn_i(X)),  MultiHead = Concat(head_i) W_O   (their eq. 3)

with lq1, lk1, lq2, lk2 learned vectors of width d shared by the heads of a layer. The map a head
applies to V, and the one drawn, is the signed difference: a row sums to 1 - lambda. The paper
halves the head count to keep the parameter count; here a head keeps its width d_head and splits
its query/key width in two, so `model.n_heads` means the same thing for every variant.

Both maps are ordinary softmax attention, so every backend runs it (two kernel calls); with
lambda = 0 it is softmax attention on the first half's projections, normalised per head.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from attnexp.attention.kernels import attend, repeat_kv, softmax_weights
from attnexp.attention.registry import register
from attnexp.attention.variants.mha import MultiHead
from attnexp.config import check


@register
class Differential(MultiHead):
    name = "differential"
    summary = "differential attention: difference of two softmax maps, learned lambda, per-head RMSNorm (Ye et al. 2024)"
    rows = "signed"

    def __init__(self, d_model, n_heads, cfg):
        super().__init__(d_model, n_heads, cfg)
        half = self.d_head // 2
        self.lambda_q1, self.lambda_k1, self.lambda_q2, self.lambda_k2 = (
            nn.Parameter(torch.randn(half) * 0.1) for _ in range(4))
        self.head_norm = nn.RMSNorm(self.d_head, eps=1e-5)
        self.set_layer(0)  # lambda_init of the first layer until the block says which layer this is

    @classmethod
    def flops_per_query(cls, a, T, d_model, n_heads):
        keys = cls.keys_per_query(a, T)  # two maps of half-width q·k, each times the full-width v
        return 2 * keys * d_model + 2 * 2 * keys * d_model

    @classmethod
    def check_config(cls, a, m):
        check((m.d_model // m.n_heads) % 2 == 0,
              f"differential needs an even head size to split q and k in two; d_model/n_heads = {m.d_model // m.n_heads}")

    def set_layer(self, layer: int) -> None:
        self.lambda_init = 0.8 - 0.6 * math.exp(-0.3 * layer)  # the paper's l - 1, with l counted from 1

    def lam(self) -> torch.Tensor:
        return (torch.exp(self.lambda_q1 @ self.lambda_k1) - torch.exp(self.lambda_q2 @ self.lambda_k2)
                + self.lambda_init)

    def kernel(self, q, k, v, mask, need_weights, bias):
        q1, q2 = q.chunk(2, dim=-1)
        k1, k2 = k.chunk(2, dim=-1)
        lam = self.lam().to(q.dtype)
        # eager (without dropout at work): the output from the signed map itself, so the probe's maps
        # are the tensor it used (gradients reach them) and equal eager's to the bit; the two maps
        # are taken without multiplying V, which only their difference is
        if need_weights or (self.backend == "eager" and not (self.training and self.cfg.dropout > 0)):
            H, scale = q.shape[1], 1.0 / math.sqrt(q1.shape[-1])
            w1, w2 = (softmax_weights(qi, repeat_kv(ki, ki, H)[0], mask, scale=scale) for qi, ki in ((q1, k1), (q2, k2)))
            w = w1 - lam * w2
            return w @ v, (w if need_weights else None)
        kw = dict(backend=self.backend, dropout_p=self.cfg.dropout, training=self.training)
        return attend(q1, k1, v, mask, **kw)[0] - lam * attend(q2, k2, v, mask, **kw)[0], None

    def finish(self, out_BHTD, x_BTD):
        return super().finish(self.head_norm(out_BHTD) * (1 - self.lambda_init), x_BTD)
