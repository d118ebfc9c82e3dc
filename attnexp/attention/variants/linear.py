from __future__ import annotations

import torch
import torch.nn.functional as F

from attnexp.attention.kernels import repeat_kv
from attnexp.attention.registry import register
from attnexp.attention.variants.mha import MultiHead
from attnexp.config import check


def feature_map(x):
    return F.elu(x) + 1  # positive features, Katharopoulos et al. 2020


@register
class LinearAttention(MultiHead):
    """Kernelized attention: phi(q) phi(k)ᵀ normalized per row instead of a softmax.

    Backend `linear` runs in O(T): prefix sums of phi(k) vᵀ for causal masking, plain sums for
    bidirectional. `eager` materializes the same (T, T) weights, for maps and for checking.
    Padding keys get zero features, so they carry no weight.
    """

    name = "linear"
    summary = "linear (kernelized, elu+1) attention with a causal prefix-sum form"
    backends = ("eager", "linear")
    softmax = False
    backends_why = "not a softmax: no sdpa/flex kernel; its own O(T) prefix-sum backend `linear`"
    options = {"eps": 1e-6}

    @classmethod
    def flops_per_query(cls, a, T, d_model, n_heads):
        d_head = d_model // n_heads  # phi(k) v^T into a (d_head x d_head) state, then phi(q) against it: per head
        return 2 * 2 * n_heads * d_head * d_head

    @classmethod
    def check_config(cls, a, m):
        check(a.eps > 0, f"attention.eps={a.eps} must be > 0 (it keeps the row normaliser away from zero)")

    def kernel(self, q, k, v, mask, need_weights, bias):
        k, v = repeat_kv(k, v, q.shape[1])
        fq, fk = feature_map(q), feature_map(k)
        if mask.key_valid_BT is not None:
            fk = fk * mask.key_valid_BT[:, None, :, None].to(fk.dtype)
        if need_weights or self.backend == "eager":
            allowed = mask.allowed(q.shape[2], q.device, include_self=False).to(fq.dtype)
            a = (fq @ fk.transpose(-2, -1)) * allowed
            w = a / (a.sum(-1, keepdim=True) + self.cfg.eps)
            return w @ v, (w if need_weights else None)
        if mask.causal:
            kv_BHTDD = torch.cumsum(fk[..., :, None] * v[..., None, :], dim=2)
            num = (fq[..., :, None] * kv_BHTDD).sum(-2)
            den = (fq * torch.cumsum(fk, dim=2)).sum(-1, keepdim=True)
        else:
            num = fq @ (fk.transpose(-2, -1) @ v)
            den = fq @ fk.sum(2, keepdim=True).transpose(-2, -1)
        return num / (den + self.cfg.eps), None
