"""microsoft/unilm, Diff-Transformer/multihead_diffattn.py, `MultiheadDiffAttn.forward` and
`lambda_init_fn` (MIT licence), commit b3783e7d6c080cd682345aa80f3b2322e447da38; its RMSNorm from
Diff-Transformer/diff/rms_norm.py (45d438e80aaf5eb58df55674c36fbb4b91b67271) and the interleaved
rotary embedding of Diff-Transformer/diff/kernel/rotary.py (a Triton kernel; its arithmetic for
interleaved=True written in torch below).

Changed: parameters are passed in a dict (q_proj, k_proj, v_proj, out_proj weights, no biases, as
theirs; lambda_q1/k1/q2/k2; subln); num_kv_heads = num_heads (n_rep = 1); float32 upcasts as in
references/__init__.py."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from helpers.references import _at_least_fp32


def lambda_init_fn(depth):
    return 0.8 - 0.6 * math.exp(-0.3 * depth)


def apply_rotary_emb_interleaved(x, cos, sin):
    """rotary.py with interleaved=True: pairs (x[2i], x[2i+1]) rotated by cos/sin[:, i]; x (b, s, h, d)."""
    cos = cos.repeat_interleave(2, -1)[None, :, None, :]
    sin = sin.repeat_interleave(2, -1)[None, :, None, :]
    x_swap = torch.stack([x[..., 1::2], x[..., 0::2]], -1).flatten(-2)  # X[1, 0, 3, 2, ...]
    even = torch.arange(x.shape[-1], device=x.device) % 2 == 0
    return torch.where(even, x * cos - x_swap * sin, x * cos + x_swap * sin)


def rms_norm(x, weight, eps):
    output = (x.to(_at_least_fp32(x)) * torch.rsqrt(x.to(_at_least_fp32(x)).pow(2).mean(-1, keepdim=True) + eps)).type_as(x)
    return output * weight


def multihead_diffattn(x, p, num_heads, depth, rel_pos, attn_mask=None):
    bsz, tgt_len, embed_dim = x.size()
    src_len = tgt_len
    head_dim = embed_dim // num_heads // 2
    scaling = head_dim ** -0.5
    lambda_init = lambda_init_fn(depth)

    q = F.linear(x, p["q_proj"])
    k = F.linear(x, p["k_proj"])
    v = F.linear(x, p["v_proj"])

    q = q.view(bsz, tgt_len, 2 * num_heads, head_dim)
    k = k.view(bsz, src_len, 2 * num_heads, head_dim)
    v = v.view(bsz, src_len, num_heads, 2 * head_dim)

    q = apply_rotary_emb_interleaved(q, *rel_pos)
    k = apply_rotary_emb_interleaved(k, *rel_pos)

    offset = src_len - tgt_len
    q = q.transpose(1, 2)
    k = k.transpose(1, 2)
    v = v.transpose(1, 2)
    q = q * scaling
    attn_weights = torch.matmul(q, k.transpose(-1, -2))
    if attn_mask is None:
        attn_mask = torch.triu(torch.zeros([tgt_len, src_len]).float().fill_(float("-inf")).type_as(attn_weights), 1 + offset)
    attn_weights = torch.nan_to_num(attn_weights)
    attn_weights = attn_weights + attn_mask
    attn_weights = F.softmax(attn_weights, dim=-1, dtype=_at_least_fp32(attn_weights)).type_as(attn_weights)

    lambda_1 = torch.exp(torch.sum(p["lambda_q1"] * p["lambda_k1"], dim=-1)).type_as(q)
    lambda_2 = torch.exp(torch.sum(p["lambda_q2"] * p["lambda_k2"], dim=-1)).type_as(q)
    lambda_full = lambda_1 - lambda_2 + lambda_init
    attn_weights = attn_weights.view(bsz, num_heads, 2, tgt_len, src_len)
    attn_weights = attn_weights[:, :, 0] - lambda_full * attn_weights[:, :, 1]

    attn = torch.matmul(attn_weights, v)
    attn = rms_norm(attn, p["subln"], eps=1e-5)
    attn = attn * (1 - lambda_init)
    attn = attn.transpose(1, 2).reshape(bsz, tgt_len, num_heads * 2 * head_dim)

    return F.linear(attn, p["out_proj"])
