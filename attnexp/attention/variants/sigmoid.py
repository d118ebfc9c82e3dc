"""Sigmoid attention: Ramapuram et al. 2024, "Theory, Analysis, and Best Practices for Sigmoid
Self-Attention" (arXiv:2409.04431).

    w_ij = sigmoid(q_i·k_j / sqrt(d) + b),  b = -log(n)                       (their eq. 3, §3.2)

with n the sequence length (each sequence's real length, so padding a batch changes nothing), so that at initialisation a row's total weight is about 1 like a
softmax's (their best practice; without the bias the output norm grows with n). Every weight is
in (0, 1) on its own: a row is not normalised and may sum above or below 1. Masked keys get
exactly 0. No fused kernel here computes it (their FlashSigmoid is a custom CUDA kernel), so it
runs on eager only.
"""

from __future__ import annotations

import math

import torch

from attnexp.attention.kernels import eager_weighted
from attnexp.attention.registry import register
from attnexp.attention.variants.fused import FusedMultiHead


def sigmoid_weights(scores_BHTT, allowed, bias):
    """Elementwise sigmoid(scores + bias), zero where `allowed` is False."""
    return torch.sigmoid(scores_BHTT + bias) * allowed.to(scores_BHTT.dtype)


def length_bias(mask, T: int, device, dtype) -> torch.Tensor | float:
    """-log(n): n = the real length of each sequence, (B, 1, 1, 1), or T without padding."""
    if mask.key_valid_BT is None:
        return -math.log(T)
    n_B = mask.key_valid_BT.sum(-1).clamp_min(1).to(device=device, dtype=torch.float32)
    return (-torch.log(n_B)[:, None, None, None]).to(dtype)


@register
class SigmoidAttention(FusedMultiHead):
    name = "sigmoid"
    summary = "sigmoid attention: elementwise sigmoid(score - log T), no normalisation (Ramapuram et al. 2024)"
    backends = ("eager",)
    backends_why = "elementwise sigmoid, not a softmax: sdpa/flex normalise rows (FlashSigmoid is not in torch)"
    softmax = False
    rows = "any (>= 0)"

    def kernel(self, q, k, v, mask, need_weights, bias):
        T = q.shape[2]
        allowed, b = mask.allowed(T, q.device), length_bias(mask, T, q.device, q.dtype)
        return eager_weighted(q, k, v, lambda scores: sigmoid_weights(scores, allowed, b), dropout_p=self.cfg.dropout,
                              training=self.training, need_weights=need_weights)
