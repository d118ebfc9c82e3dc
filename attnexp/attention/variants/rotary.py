from __future__ import annotations

import torch

from attnexp.attention.registry import register
from attnexp.attention.variants.fused import FusedMultiHead
from attnexp.config import check


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


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
        inv_freq = 1.0 / cfg.rope_base ** (torch.arange(0, self.d_head, 2).float() / self.d_head)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def rotate(self, q_BHTD, k_BGTD):
        T = q_BHTD.shape[2]
        angles_TD = torch.outer(torch.arange(T, device=q_BHTD.device, dtype=torch.float32), self.inv_freq)
        angles_TD = torch.cat((angles_TD, angles_TD), dim=-1)
        cos, sin = angles_TD.cos().to(q_BHTD.dtype), angles_TD.sin().to(q_BHTD.dtype)
        return q_BHTD * cos + rotate_half(q_BHTD) * sin, k_BGTD * cos + rotate_half(k_BGTD) * sin
