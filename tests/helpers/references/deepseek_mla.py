"""deepseek-ai/DeepSeek-V3, inference/model.py, `MLA.forward` (attn_impl="naive"),
`precompute_freqs_cis`, `apply_rotary_emb` and `RMSNorm` (MIT licence), commit
b15f0dbbbe6a4bc403306175698439ef380f5fb5.

Changed: parameters in a dict (wq or wq_a/q_norm/wq_b, wkv_a, kv_norm, wkv_b, wo: their Linear
layers have no bias); one process (world_size 1) and no KV cache (start_pos = 0, the naive path's
k/v written straight through); no YaRN (max_seq_len <= original_seq_len, so softmax_scale is
qk_head_dim ** -0.5 and the frequencies are unscaled); float32 upcasts as in
references/__init__.py. Their rotary embedding rotates interleaved pairs (x[2i], x[2i+1]);
attnexp's rotates halves, which is the same function after permuting the rope channels (the test
maps the weights)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from helpers.references import _at_least_fp32


def precompute_freqs_cis(qk_rope_head_dim, seqlen, rope_theta):
    dim, base = qk_rope_head_dim, rope_theta
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64)[: (dim // 2)] / dim))
    t = torch.arange(seqlen, dtype=torch.float64)
    return torch.polar(torch.ones((seqlen, len(freqs)), dtype=torch.float64), torch.outer(t, freqs))


def apply_rotary_emb(x, freqs_cis):
    dtype = x.dtype
    x = torch.view_as_complex(x.to(_at_least_fp32(x)).view(*x.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.view(1, x.size(1), 1, x.size(-1))
    y = torch.view_as_real(x * freqs_cis).flatten(3)
    return y.to(dtype)


def rms_norm(x, weight, eps=1e-6):
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


def mla(x, p, n_heads, q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, freqs_cis, mask):
    bsz, seqlen, _ = x.size()
    qk_head_dim = qk_nope_head_dim + qk_rope_head_dim
    softmax_scale = qk_head_dim ** -0.5
    if q_lora_rank == 0:
        q = F.linear(x, p["wq"])
    else:
        q = F.linear(rms_norm(F.linear(x, p["wq_a"]), p["q_norm"]), p["wq_b"])
    q = q.view(bsz, seqlen, n_heads, qk_head_dim)
    q_nope, q_pe = torch.split(q, [qk_nope_head_dim, qk_rope_head_dim], dim=-1)
    q_pe = apply_rotary_emb(q_pe, freqs_cis)
    kv = F.linear(x, p["wkv_a"])
    kv, k_pe = torch.split(kv, [kv_lora_rank, qk_rope_head_dim], dim=-1)
    k_pe = apply_rotary_emb(k_pe.unsqueeze(2), freqs_cis)
    q = torch.cat([q_nope, q_pe], dim=-1)
    kv = F.linear(rms_norm(kv, p["kv_norm"]), p["wkv_b"])
    kv = kv.view(bsz, seqlen, n_heads, qk_nope_head_dim + v_head_dim)
    k_nope, v = torch.split(kv, [qk_nope_head_dim, v_head_dim], dim=-1)
    k = torch.cat([k_nope, k_pe.expand(-1, -1, n_heads, -1)], dim=-1)
    scores = torch.einsum("bshd,bthd->bsht", q, k) * softmax_scale
    if mask is not None:
        scores += mask.unsqueeze(1)
    scores = scores.softmax(dim=-1, dtype=_at_least_fp32(scores)).type_as(x)
    x = torch.einsum("bsht,bthd->bshd", scores, v)
    return F.linear(x.flatten(2), p["wo"])
