from __future__ import annotations

import torch
from torch import nn

from attnexp.attention.base import Attention
from attnexp.attention.registry import register
from attnexp.attention.variants.single_head import Head


@register
class MultiHeadList(Attention):
    """h independent heads run one after another, outputs concatenated, then an output projection.

    The textbook form; slower than `fused` but the same function (tests copy weights across).
    """

    name = "multi_head_list"
    summary = "h independent heads in a ModuleList, concatenated, output projection"

    def __init__(self, d_model, n_heads, cfg):
        super().__init__(d_model, n_heads, cfg)
        self.heads = nn.ModuleList(Head(d_model, d_model // n_heads, cfg) for _ in range(n_heads))
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x_BTD, mask, need_weights=False):
        outs, ws = zip(*(h(x_BTD, mask, need_weights) for h in self.heads))
        w_BHTT = torch.cat(ws, dim=1) if need_weights else None
        return self.out(torch.cat(outs, dim=-1)), w_BHTT
