from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from attnexp.attention.registry import register
from attnexp.attention.variants.mha import MultiHead


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """Geometric slopes 2^(-8/n), 2^(-16/n), ... from Press et al.; interleaved for non-powers of 2."""
    def pow2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n_heads).is_integer():
        return torch.tensor(pow2(n_heads))
    closest = 2 ** math.floor(math.log2(n_heads))
    return torch.tensor(pow2(closest) + pow2(2 * closest)[0::2][: n_heads - closest])


@dataclass
class DistancePenalty:
    """score_ij - slope_h * |i - j|, as a dense bias and as a FlexAttention score_mod."""

    slopes_H: Tensor

    def dense(self, T: int) -> Tensor:
        pos = torch.arange(T, device=self.slopes_H.device)
        dist_TT = (pos[:, None] - pos[None, :]).abs().to(self.slopes_H.dtype)
        return (-self.slopes_H[:, None, None] * dist_TT)[None]  # (1, H, T, T)

    def score_mod(self):
        slopes_H = self.slopes_H

        def mod(score, b, h, q_idx, kv_idx):
            return score - slopes_H[h] * (q_idx - kv_idx).abs()

        return mod


@register
class ALiBi(MultiHead):
    """Attention with Linear Biases (Press et al. 2022): score_ij - slope_h * |i - j|, no position embeddings."""

    name = "alibi"
    summary = "ALiBi: per-head linear distance penalty on the scores"
    positional = True

    def __init__(self, d_model, n_heads, cfg):
        super().__init__(d_model, n_heads, cfg)
        self.register_buffer("slopes_H", alibi_slopes(n_heads), persistent=False)

    def score_bias(self, x_BTD, mask):
        return DistancePenalty(self.slopes_H)
