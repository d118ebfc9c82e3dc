"""Gated attention: Qiu et al. 2025, "Gated Attention for Large Language Models: Non-linearity,
Sparsity, and Attention-Sink-Free" (arXiv:2505.06708).

Their best variant (G1: elementwise, head-specific, multiplicative, sigmoid) gates each head's
SDPA output by a function of the layer input X (after the block's norm), before the output
projection:

    Y' = Y ⊙ sigmoid(X W_theta)                                                   (their eq. 5)

with Y the concatenated heads' outputs softmax(QK^T/sqrt(d)) V and W_theta a (d_model x d_model)
projection, so every head has gates of its own. The gate adds a non-linearity between the value
and output projections and lets a head output nothing without a sink token. The weights are the
unchanged softmax, so every backend runs it; with the gate saturated open (sigmoid = 1) it is the
ungated layer.
"""

from __future__ import annotations

import torch
from torch import nn

from attnexp.attention.registry import register
from attnexp.attention.variants.mha import MultiHead


@register
class GatedAttention(MultiHead):
    name = "gated"
    summary = "gated attention: elementwise sigmoid gate from the layer input on each head's output (Qiu et al. 2025)"

    def __init__(self, d_model, n_heads, cfg):
        super().__init__(d_model, n_heads, cfg)
        self.gate = nn.Linear(d_model, d_model)

    def finish(self, out_BHTD, x_BTD):
        B, T, _ = x_BTD.shape
        gate_BHTD = torch.sigmoid(self.gate(x_BTD)).view(B, T, self.n_heads, self.d_head).transpose(1, 2)
        return super().finish(out_BHTD * gate_BHTD, x_BTD)
