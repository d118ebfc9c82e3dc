"""Softpick: Zuhri et al. 2025, "Softpick: No Attention Sink, No Massive Activations with Rectified
Softmax" (arXiv:2504.20966).

    softpick(x)_i = ReLU(e^{x_i} - 1) / (sum_j |e^{x_j} - 1| + eps)                    (their eq. 2)

computed stably with m = max_j x_j by multiplying numerator and denominator by e^{-m}, with eps
added after the shift as the authors' code does (softpick-attention's `naive_softpick_attn.py`,
and their flash kernel's hard-coded 1e-6, the default here):

    ReLU(e^{x_i - m} - e^{-m}) / (sum_j |e^{x_j - m} - e^{-m}| + eps)                  (their eq. 3)

so eps is in units of the shifted sums (it guards a row whose shifted terms are all 0), not of
eq. 2's; the two differ by at most eps. Only allowed keys enter either sum. Scores at or below 0
get exactly 0 weight, so a row sums to at most 1 and a head can put its mass nowhere instead of on
a sink token; a row with no allowed key is all zeros (0 / eps), never NaN. Eager only: sdpa and
flex compute softmax rows.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnexp.attention.kernels import eager_weighted
from attnexp.attention.registry import register
from attnexp.attention.variants.mha import MultiHead
from attnexp.config import check


def softpick(x, allowed, eps: float, dim: int = -1):
    """Softpick over `dim`, entries where `allowed` is False excluded (weight 0)."""
    x = x.masked_fill(~allowed, float("-inf"))
    # m >= 0 keeps e^{-m} <= 1 and a fully masked row finite (m = 0). Where the true max is below 0
    # every numerator is 0 either way, so this is the authors' function (not detached: their m
    # carries gradient through eps, and so does ours).
    m = x.amax(dim, keepdim=True).clamp_min(0)
    e = torch.exp(x - m)  # 0 at masked entries
    shifted = e - torch.exp(-m)
    num = F.relu(shifted)
    den = (shifted.abs() * allowed).sum(dim, keepdim=True) + eps
    return num / den


@register
class Softpick(MultiHead):
    name = "softpick"
    summary = "softpick: rectified, sum-normalised exp(x)-1 in place of softmax (Zuhri et al. 2025)"
    backends = ("eager",)
    backends_why = "rectified rows, not a softmax: sdpa/flex cannot compute them"
    softmax = False
    rows = "at most 1"
    options = {"eps": 1e-6}

    @classmethod
    def check_config(cls, a, m):
        check(a.eps > 0, f"attention.eps={a.eps} must be > 0 (it keeps an all-zero row's denominator away from 0)")

    def kernel(self, q, k, v, mask, need_weights, bias):
        allowed = mask.allowed(q.shape[2], q.device)
        return eager_weighted(q, k, v, lambda scores: softpick(scores, allowed.expand_as(scores), self.cfg.eps),
                              dropout_p=self.cfg.dropout, training=self.training, need_weights=need_weights)
