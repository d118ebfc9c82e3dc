"""Sigmoid attention: Ramapuram et al. 2024, "Theory, Analysis, and Best Practices for Sigmoid
Self-Attention" (arXiv:2409.04431).

    w_ij = sigmoid(q_i·k_j / sqrt(d) + b)                                     (their eq. 3, §3.2)

with b a constant of the layer, `attention.sigmoid_bias`, by default -log(model.max_len): the
authors fix it once from the training context length (FlashSigmoid's configs: sigmoid_bias =
-7.62 = -ln 2048 for max_seq_len 2048) and keep it at every length, so that at initialisation a
row of a full-length sequence sums to about 1 like a softmax's (their best practice; without the
bias the output norm grows with n). It is never taken from the batch: a bias from the sequence's
own length would make position i depend on how many tokens follow it, a leak of the future under
a causal mask (tests/unit/attention/test_prefix_invariance.py).

Every weight is in (0, 1) on its own: a row is not normalised and may sum above or below 1.
Masked keys get exactly 0. No fused kernel here computes it (their FlashSigmoid is a custom CUDA
kernel), so it runs on eager only.
"""

from __future__ import annotations

import math

import torch

from attnexp.attention.kernels import eager_weighted
from attnexp.attention.registry import register
from attnexp.attention.variants.mha import MultiHead


def sigmoid_weights(scores_BHTT, allowed, bias: float):
    """Elementwise sigmoid(scores + bias), zero where `allowed` is False."""
    return torch.sigmoid(scores_BHTT + bias) * allowed.to(scores_BHTT.dtype)


@register
class SigmoidAttention(MultiHead):
    name = "sigmoid"
    summary = ("sigmoid attention: elementwise sigmoid(score + b), b = attention.sigmoid_bias (-log max_len) "
               "(Ramapuram et al. 2024)")
    backends = ("eager",)
    backends_why = "elementwise sigmoid, not a softmax: sdpa/flex normalise rows (FlashSigmoid is not in torch)"
    softmax = False
    rows = "any (>= 0)"
    options = {"sigmoid_bias": None}  # default from the model: -log(model.max_len)

    @classmethod
    def model_defaults(cls, m):
        return {"sigmoid_bias": -math.log(m.max_len)}

    def __init__(self, d_model, n_heads, cfg):
        if cfg.sigmoid_bias is None:
            raise ValueError("sigmoid attention needs attention.sigmoid_bias; build it through "
                             "attention.build(..., m=ModelConfig) or a validated config, which default it to -log(model.max_len)")
        super().__init__(d_model, n_heads, cfg)

    def kernel(self, q, k, v, mask, need_weights, bias):
        allowed, b = mask.allowed(q.shape[2], q.device), self.cfg.sigmoid_bias
        return eager_weighted(q, k, v, lambda scores: sigmoid_weights(scores, allowed, b), dropout_p=self.cfg.dropout,
                              training=self.training, need_weights=need_weights)
