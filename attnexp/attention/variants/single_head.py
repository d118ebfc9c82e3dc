from __future__ import annotations

from torch import nn

from attnexp.attention.base import Attention
from attnexp.attention.kernels import attend
from attnexp.attention.registry import register


class Head(nn.Module):
    """One scaled dot-product head with its own Q, K, V projections (d_model -> d_head)."""

    def __init__(self, d_model: int, d_head: int, cfg, bias: bool = True):
        super().__init__()
        self.q, self.k, self.v = (nn.Linear(d_model, d_head, bias=bias) for _ in range(3))
        self.cfg = cfg

    def forward(self, x_BTD, mask, need_weights=False):
        q, k, v = (p(x_BTD)[:, None] for p in (self.q, self.k, self.v))  # (B, 1, T, d_head)
        out, w = attend(q, k, v, mask, backend=self.cfg.backend, dropout_p=self.cfg.dropout,
                        training=self.training, need_weights=need_weights)
        return out[:, 0], w


@register
class SingleHead(Attention):
    name = "single_head"
    summary = "one head, learned Q/K/V projections of full width, no output projection"

    def __init__(self, d_model, n_heads, cfg):
        super().__init__(d_model, n_heads, cfg)
        self.head = Head(d_model, d_model, cfg)

    def forward(self, x_BTD, mask, need_weights=False, head_mask_H=None):
        out, w = self.head(x_BTD, mask, need_weights)
        if head_mask_H is not None:  # its one head silenced
            out, w = out * head_mask_H[0], None if w is None else w * head_mask_H[0]
        return out, w
