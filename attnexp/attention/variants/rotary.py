from __future__ import annotations

import torch

from attnexp.attention.registry import register
from attnexp.attention.variants.fused import FusedMultiHead
from attnexp.config import check


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rope(x_BHTD, inv_freq):
    """x rotated pairwise (first half with second half of the last dim) by position x frequency."""
    T = x_BHTD.shape[2]
    angles_TD = torch.outer(torch.arange(T, device=x_BHTD.device, dtype=torch.float32), inv_freq)
    angles_TD = torch.cat((angles_TD, angles_TD), dim=-1)
    cos, sin = angles_TD.cos().to(x_BHTD.dtype), angles_TD.sin().to(x_BHTD.dtype)
    return x_BHTD * cos + rotate_half(x_BHTD) * sin


def inverse_frequencies(dim: int, base: float):
    return 1.0 / base ** (torch.arange(0, dim, 2).float() / dim)


@register
class Rotary(FusedMultiHead):
    """RoPE (Su et al.): q and k rotated by position-dependent angles, so q·k depends on i - j."""

    name = "rotary"
    summary = "rotary position embeddings (RoPE) on q and k"
    positional = True
    options = {"rope_base": 10000.0}

    @classmethod
    def check_config(cls, a, m):
        check((m.d_model // m.n_heads) % 2 == 0, f"rotary needs an even head size; d_model/n_heads = {m.d_model // m.n_heads}")
        check(a.rope_base > 1, f"attention.rope_base={a.rope_base} must be > 1")

    def __init__(self, d_model, n_heads, cfg):
        super().__init__(d_model, n_heads, cfg)
        self.register_buffer("inv_freq", inverse_frequencies(self.d_head, cfg.rope_base), persistent=False)

    def rotate(self, q_BHTD, k_BGTD):
        return rope(q_BHTD, self.inv_freq), rope(k_BGTD, self.inv_freq)
