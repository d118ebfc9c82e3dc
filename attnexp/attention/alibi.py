from __future__ import annotations

import math

import torch

from attnexp.attention import register
from attnexp.attention.fused import FusedMultiHead


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """Geometric slopes 2^(-8/n), 2^(-16/n), ... from Press et al.; interleaved for non-powers of 2."""
    def pow2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n_heads).is_integer():
        return torch.tensor(pow2(n_heads))
    closest = 2 ** math.floor(math.log2(n_heads))
    return torch.tensor(pow2(closest) + pow2(2 * closest)[0::2][: n_heads - closest])


@register
class ALiBi(FusedMultiHead):
    """Attention with Linear Biases: score_ij - slope_h * |i - j|, no position embeddings."""

    name = "alibi"
    summary = "ALiBi: per-head linear distance penalty on the scores"
    positional = True

    def __init__(self, d_model, n_heads, cfg):
        super().__init__(d_model, n_heads, cfg)
        self.slopes_H = alibi_slopes(n_heads)
