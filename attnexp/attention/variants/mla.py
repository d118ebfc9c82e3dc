"""Multi-head latent attention: DeepSeek-AI 2024, "DeepSeek-V2: A Strong, Economical, and
Efficient Mixture-of-Experts Language Model" (arXiv:2405.04434), §2.1.2-2.1.3.

Keys and values are up-projected from one shared low-rank latent, which is all a KV cache holds:

    c_KV = W_DKV h                    (d_c = attention.kv_rank)                      (their eq. 9)
    k^C = W_UK c_KV,  v^C = W_UV c_KV (per head, d_h each)                          (eq. 10-11)

Queries optionally through a latent of their own (attention.q_rank; 0 = a direct projection):

    c_Q = W_DQ h,  q^C = W_UQ c_Q                                                    (eq. 12-13)

Each latent is RMS-normalised before its up-projections, as the paper adds ("additional RMS Norm
layers after the compressed latent vectors", §3.1.2) and DeepSeek's released code does
(DeepSeek-V3 inference/model.py: `MLA.kv_norm`, and `MLA.q_norm` when the query is compressed;
eps 1e-6, a learned scale starting at 1). tests/unit/attention/test_reference_implementations.py checks this
layer against a transcription of that code at equal weights.

RoPE cannot act on k^C (it would block absorbing W_UK into the query at inference), so a
decoupled part of width d_R (attention.rope_dim) carries positions: per-head rotated queries
and one rotated key shared by all heads,

    q^R = RoPE(W_QR c_Q),  k^R = RoPE(W_KR h)                                        (eq. 14-15)
    q = [q^C; q^R],  k = [k^C; k^R],  o = softmax(q·k / sqrt(d_h + d_R)) v^C,  u = W_O o   (eq. 16-19)

Projections have no biases, as in the paper. It is softmax attention with a query/key width
(d_h + d_R) unlike the value width d_h, which sdpa and FlexAttention both take.
"""

from __future__ import annotations

import torch
from torch import nn

from attnexp.attention.base import Attention
from attnexp.attention.registry import register
from attnexp.attention.variants.mha import MultiHead
from attnexp.attention.variants.rotary import rope
from attnexp.config import check


@register
class MultiHeadLatent(MultiHead):
    name = "mla"
    summary = "multi-head latent attention: low-rank joint K/V latent, decoupled RoPE (DeepSeek-V2)"
    positional = True
    packed_qkv = False  # separate down- and up-projections
    options = {"kv_rank": 32, "q_rank": 0, "rope_dim": 8, "rope_base": 10000.0}

    def __init__(self, d_model, n_heads, cfg):
        Attention.__init__(self, d_model, n_heads, cfg)  # its own projections, not mha's one QKV projection
        H, Dh, R = n_heads, d_model // n_heads, cfg.rope_dim
        self.d_head = Dh
        self.kv_down = nn.Linear(d_model, cfg.kv_rank, bias=False)  # W_DKV
        self.kv_norm = nn.RMSNorm(cfg.kv_rank, eps=1e-6)  # DeepSeek's MLA.kv_norm on c_KV
        self.k_up = nn.Linear(cfg.kv_rank, H * Dh, bias=False)  # W_UK
        self.v_up = nn.Linear(cfg.kv_rank, H * Dh, bias=False)  # W_UV
        self.k_rope = nn.Linear(d_model, R, bias=False)  # W_KR, one key part shared by the heads
        q_in = cfg.q_rank or d_model
        self.q_down = nn.Linear(d_model, cfg.q_rank, bias=False) if cfg.q_rank else None  # W_DQ
        self.q_norm = nn.RMSNorm(cfg.q_rank, eps=1e-6) if cfg.q_rank else None  # MLA.q_norm on c_Q
        self.q_up = nn.Linear(q_in, H * Dh, bias=False)  # W_UQ
        self.q_rope = nn.Linear(q_in, H * R, bias=False)  # W_QR
        self.out = nn.Linear(H * Dh, d_model, bias=False)  # W_O

    @classmethod
    def flops_per_query(cls, a, T, d_model, n_heads):
        keys = cls.keys_per_query(a, T)  # q·k over the content and the decoupled RoPE part, weights times v
        return 2 * keys * n_heads * (d_model // n_heads + a.rope_dim) + 2 * keys * d_model

    @classmethod
    def check_config(cls, a, m):
        check(a.kv_rank > 0, f"attention.kv_rank={a.kv_rank} must be > 0")
        check(a.q_rank >= 0, f"attention.q_rank={a.q_rank} must be >= 0 (0: queries not compressed)")
        check(a.rope_dim > 0 and a.rope_dim % 2 == 0, f"attention.rope_dim={a.rope_dim} must be even and > 0")
        check(a.rope_base > 1, f"attention.rope_base={a.rope_base} must be > 1")

    def project(self, x_BTD):
        B, T, _ = x_BTD.shape
        H, Dh, R = self.n_heads, self.d_head, self.cfg.rope_dim

        def heads(t, width):
            return t.view(B, T, -1, width).transpose(1, 2)

        c_kv = self.kv_norm(self.kv_down(x_BTD))
        c_q = x_BTD if self.q_down is None else self.q_norm(self.q_down(x_BTD))
        base = self.cfg.rope_base
        k_rope_B1TR = rope(heads(self.k_rope(x_BTD), R), base)
        q_BHTE = torch.cat([heads(self.q_up(c_q), Dh), rope(heads(self.q_rope(c_q), R), base)], -1)
        k_BHTE = torch.cat([heads(self.k_up(c_kv), Dh), k_rope_B1TR.expand(B, H, T, R)], -1)
        return q_BHTE, k_BHTE, heads(self.v_up(c_kv), Dh)
