"""Smeared keys (Olsson et al. 2022, "In-context learning and induction heads", Argument 2: the
smeared-key architecture): each head's key at position j is a learned mix of its own key and the
previous position's, k'_j = sigmoid(a) k_j + (1 - sigmoid(a)) k_{j-1} (k'_0 = k_0), one `a` a head.
A key then carries the token before it, which an induction head otherwise needs a previous-token
head in an earlier layer to write: with it, one layer can form an induction head, and Olsson et al.
see the phase change come earlier. The authors released no code for it; this follows the paper's
equation. `a` starts at 0 (an even mix) unless attention.smear_init says otherwise."""

from __future__ import annotations

import torch
from torch import nn

from attnexp.attention.registry import register
from attnexp.attention.variants.mha import MultiHead
from attnexp.config import check


@register
class SmearedKeys(MultiHead):
    """Each key mixed with the previous position's by a learned per-head weight sigmoid(a)."""

    name = "smeared"
    summary = "smeared keys (Olsson et al. 2022): each key mixed with the previous position's, a learned weight a head"
    options = {"smear_init": 0.0}

    @classmethod
    def check_config(cls, a, m):
        check(-20 <= a.smear_init <= 20, f"attention.smear_init={a.smear_init} must be in [-20, 20] (sigmoid of it "
                                         f"is the share of a key's own position)")

    def __init__(self, d_model, n_heads, cfg):
        super().__init__(d_model, n_heads, cfg)
        self.smear = nn.Parameter(torch.full((self.n_kv,), float(cfg.smear_init)))

    def initialise(self) -> None:
        super().initialise()
        with torch.no_grad():
            self.smear.fill_(float(self.cfg.smear_init))

    def rotate(self, q_BHTD, k_BGTD):
        own = torch.sigmoid(self.smear).to(k_BGTD.dtype)[None, :, None, None]
        previous = torch.cat([k_BGTD[:, :, :1], k_BGTD[:, :, :-1]], dim=2)  # position 0 has none: its own key
        return q_BHTD, own * k_BGTD + (1 - own) * previous
