from __future__ import annotations

import torch

from attnexp.attention.registry import register
from attnexp.attention.variants.mha import MultiHead
from attnexp.config import check


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rope(x_BHTD, base: float):
    """x rotated pairwise (first half with second half of the last dim) by position x frequency.
    Angles are computed in float32, or float64 for float64 inputs (so a float64 check against a
    reference is exact), never in bf16."""
    T, D = x_BHTD.shape[2], x_BHTD.shape[3]
    dtype = torch.promote_types(x_BHTD.dtype, torch.float32)
    positions_T = torch.arange(T, device=x_BHTD.device, dtype=dtype)
    angles_TD = torch.outer(positions_T, inverse_frequencies(D, base, x_BHTD.device, dtype))
    angles_TD = torch.cat((angles_TD, angles_TD), dim=-1)
    cos, sin = angles_TD.cos().to(x_BHTD.dtype), angles_TD.sin().to(x_BHTD.dtype)
    return x_BHTD * cos + rotate_half(x_BHTD) * sin


def inverse_frequencies(dim: int, base: float, device=None, dtype=torch.float32):
    return 1.0 / base ** (torch.arange(0, dim, 2, device=device, dtype=dtype) / dim)


@register
class Rotary(MultiHead):
    """RoPE (Su et al.): q and k rotated by position-dependent angles, so q·k depends on i - j."""

    name = "rotary"
    summary = "rotary position embeddings (RoPE) on q and k"
    positional = True
    options = {"rope_base": 10000.0}

    @classmethod
    def check_config(cls, a, m):
        check((m.d_model // m.n_heads) % 2 == 0, f"rotary needs an even head size; d_model/n_heads = {m.d_model // m.n_heads}")
        check(a.rope_base > 1, f"attention.rope_base={a.rope_base} must be > 1")

    def rotate(self, q_BHTD, k_BGTD):
        return rope(q_BHTD, self.cfg.rope_base), rope(k_BGTD, self.cfg.rope_base)
