from __future__ import annotations

import torch
from torch import nn

from attnexp.attention.base import Attention
from attnexp.attention.registry import register
from attnexp.attention.variants.single_head import Head


@register
class MultiHeadList(Attention):
    """h independent heads run one after another, outputs concatenated, then an output projection.

    The textbook form; slower than `mha` but the same function (tests copy weights across).
    """

    name = "multi_head_list"
    summary = "h independent heads in a ModuleList, concatenated, output projection"

    def __init__(self, d_model, n_heads, cfg):
        super().__init__(d_model, n_heads, cfg)
        self.heads = nn.ModuleList(Head(d_model, d_model // n_heads, cfg) for _ in range(n_heads))
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x_BTD, mask, need_weights=False, head_mask_H=None):
        keep = [1.0] * len(self.heads) if head_mask_H is None else head_mask_H.to(x_BTD.dtype)
        if need_weights:  # the output from the returned maps themselves, so gradients reach them (explain.py)
            w_BHTT = torch.cat([h(x_BTD, mask, True)[1] * keep[i] for i, h in enumerate(self.heads)], dim=1)
            outs = [w_BHTT[:, i] @ h.v(x_BTD) for i, h in enumerate(self.heads)]
            return self.out(torch.cat(outs, dim=-1)), w_BHTT
        outs = [h(x_BTD, mask)[0] * keep[i] for i, h in enumerate(self.heads)]
        return self.out(torch.cat(outs, dim=-1)), None
