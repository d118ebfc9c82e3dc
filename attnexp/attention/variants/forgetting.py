"""Forgetting Transformer: Lin et al. 2025, "Forgetting Transformer: Softmax Attention with a
Forget Gate" (ICLR 2025, arXiv:2503.02130).

A scalar forget gate per head and position, computed from the layer input,

    f_t = sigmoid(w_f · x_t + b_f)                                              (their eq. 6)

decays the unnormalised weights: o_i = sum_{j<=i} F_ij exp(q_i·k_j) v_j / sum_{j<=i} F_ij exp(q_i·k_j)
with F_ij = prod_{l=j+1}^{i} f_l, i.e. softmax attention with the additive score bias

    D_ij = sum_{l=j+1}^{i} log f_l = c_i - c_j,   c_t = sum_{l<=t} log f_l       (their eq. 7-9)

The paper defines the causal case. With a bidirectional mask we use the same decay in both
directions, D_ij = -|c_i - c_j| (for j <= i this is exactly c_i - c_j, as c never increases):
a key's weight decays with the forget gates between it and the query on either side. Padding
positions forget nothing (log f = 0), so they change no real position's bias.

The bias is a `ScoreBias`: dense for eager/sdpa, a FlexAttention score_mod reading c. With every
f_t = 1 (log f = 0) it is plain softmax attention.

Initialisation follows the authors' code (zhixuan-lin/forgetting-transformer,
`ForgettingAttentionLayer` with the default data-dependent gate, fgate_type="full"): `fgate_proj`
is an nn.Linear with bias, its weight drawn N(0, 0.02²) and its bias zeroed, so every gate starts
near f = sigmoid(0) = 0.5. Their special bias initialisation (decay times between T_min and T_max)
is only for the data-independent gates. `attention.forget_bias_init` sets the starting bias (0 by
default, theirs): a larger one starts with little forgetting (3: f ≈ 0.95).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnexp.attention.registry import register
from attnexp.attention.variants.mha import MultiHead


@dataclass
class ForgetDecay:
    """score_ij - |c_i - c_j| from the cumulative log forget gates c (B, H, T)."""

    c_BHT: Tensor

    def dense(self, T: int) -> Tensor:
        c = self.c_BHT  # float32 (float64 for float64 inputs)
        return -(c[..., :, None] - c[..., None, :]).abs()  # (B, H, T, T)

    def score_mod(self):
        # two tensors, not one read twice: compiled FlexAttention's backward refuses a score_mod that
        # indexes one tensor needing gradients twice (Inductor NYI, seen on an H100 with torch 2.11);
        # the clone's gradient flows back into c, so the sum is the same
        c_q, c_k = self.c_BHT, self.c_BHT.clone()

        def mod(score, b, h, q_idx, kv_idx):
            return score - (c_q[b, h, q_idx] - c_k[b, h, kv_idx]).abs()

        return mod


@register
class Forgetting(MultiHead):
    name = "forgetting"
    summary = "Forgetting Transformer: data-dependent forget gate as a cumulative log-decay score bias (Lin et al. 2025)"
    positional = True  # the decay orders keys by position, as FoX is used without position embeddings
    options = {"forget_bias_init": 0.0}

    def __init__(self, d_model, n_heads, cfg):
        super().__init__(d_model, n_heads, cfg)
        self.forget = nn.Linear(d_model, n_heads)
        self.initialise()

    def initialise(self):
        with torch.no_grad():
            self.forget.bias.fill_(self.cfg.forget_bias_init)

    def score_bias(self, x_BTD, mask):
        logit_BTH = self.forget(x_BTD)
        log_f_BTH = F.logsigmoid(logit_BTH.to(torch.promote_types(logit_BTH.dtype, torch.float32)))  # as theirs: >= fp32
        if mask.key_valid_BT is not None:
            log_f_BTH = log_f_BTH * mask.key_valid_BT[..., None].to(log_f_BTH.dtype)
        return ForgetDecay(torch.cumsum(log_f_BTH, dim=1).transpose(1, 2).contiguous())
