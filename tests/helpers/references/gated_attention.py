"""qiuzh20/gated_attention, modeling_qwen3.py, `Qwen3Attention.forward` with
elementwise_attn_output_gate=True (the paper's G1), `rotate_half` and `apply_rotary_pos_emb` (MIT
licence), commit df42212f08f0ab69d3b26956d61feff730dc3804.

Changed: parameters in a dict (q_proj (queries and gates interleaved per key/value group, as
theirs), k_proj, v_proj, o_proj, each with weight and bias: qkv_bias=True); num_key_value_heads =
num_heads; use_qk_norm=False; no KV cache; attention dropout 0; float32 upcast as in
references/__init__.py."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from helpers.references import _at_least_fp32


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def qwen3_gated_attention(hidden_states, p, num_heads, position_embeddings, attention_mask=None):
    bsz, q_len, hidden_size = hidden_states.size()
    head_dim = hidden_size // num_heads
    num_key_value_heads, num_key_value_groups = num_heads, 1

    query_states = F.linear(hidden_states, *p["q_proj"])
    key_states = F.linear(hidden_states, *p["k_proj"])
    value_states = F.linear(hidden_states, *p["v_proj"])

    query_states = query_states.view(bsz, q_len, num_key_value_heads, -1)
    query_states, gate_score = torch.split(query_states, [head_dim * num_key_value_groups,
                                                          head_dim * num_key_value_groups], dim=-1)
    gate_score = gate_score.reshape(bsz, q_len, -1, head_dim)
    query_states = query_states.reshape(bsz, q_len, -1, head_dim).transpose(1, 2)

    key_states = key_states.view(bsz, q_len, -1, head_dim).transpose(1, 2)
    value_states = value_states.view(bsz, q_len, -1, head_dim).transpose(1, 2)

    cos, sin = position_embeddings
    query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)

    attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(head_dim)
    if attention_mask is not None:
        causal_mask = attention_mask[:, :, :, : key_states.shape[-2]]
        attn_weights = attn_weights + causal_mask
    attn_weights = F.softmax(attn_weights, dim=-1, dtype=_at_least_fp32(attn_weights)).to(query_states.dtype)

    attn_output = torch.matmul(attn_weights, value_states)
    attn_output = attn_output.transpose(1, 2).contiguous()
    attn_output = attn_output * torch.sigmoid(gate_score)
    attn_output = attn_output.reshape(bsz, q_len, -1)
    return F.linear(attn_output, *p["o_proj"])
