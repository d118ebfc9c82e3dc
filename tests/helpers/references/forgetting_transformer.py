"""zhixuan-lin/forgetting-transformer, src/forgetting_transformer/model/forgetting_transformer/
modeling_forgetting_transformer.py, `ForgettingAttentionLayer` with its defaults (fgate_type
"full", no RoPE, no output gate or norm, no QK-norm, no shifts, no pruning; MIT licence), commit
883f260c636e87971339749b0d8310004794a5cc: the forget gate `fgate_proj` (a Linear with bias),
log f = logsigmoid(fgate_logit.float()), and the decay bias it writes for `output_attentions`
(log_lambda = cumsum(log f); bias_ij = log_lambda_i - log_lambda_j).

Their attention itself is a Triton kernel (src/forgetting_transformer/ops/forgetting_attention.py:
causal only, sm_scale = 1/sqrt(head_dim)); its arithmetic is written out as the torch reference
the Flash Linear Attention repository keeps for the same kernel (fla-org/flash-linear-attention,
fla/ops/forgetting_attn/naive.py, `naive_forgetting_attn`, MIT, commit
012a873a08d74f49bc91995b4f3faf32fa7d3e60). Changed: parameters in a dict (q/k/v/o_proj without
bias, as theirs; fgate_proj weight and bias); float32 upcasts as in references/__init__.py."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from helpers.references import _at_least_fp32


def naive_forgetting_attn(q, k, v, g, scale=None):
    """q, k, v: (B, T, H, D); g: log forget gates (B, T, H) -> (B, T, H, D)."""
    _, T, HQ, D = q.shape
    if scale is None:
        scale = D ** -0.5
    gc = g.to(_at_least_fp32(g)).cumsum(1)
    mask = torch.tril(torch.ones((T, T), dtype=torch.bool, device=q.device))
    ref = torch.einsum("bqhd,bkhd->bhqk", q * scale, k)
    ref = ref + gc.permute(0, 2, 1)[..., :, None] - gc.permute(0, 2, 1)[..., None, :]
    ref = ref.masked_fill(~mask.unsqueeze(0).unsqueeze(0), -float("inf"))
    return torch.einsum("bhqk,bkhd->bqhd", F.softmax(ref, dim=-1), v)


def forgetting_attention_layer(hidden_states, p, num_heads):
    batch_size, q_len, hidden_size = hidden_states.size()
    head_dim = hidden_size // num_heads
    q = F.linear(hidden_states, p["q_proj"]).view(batch_size, q_len, num_heads, head_dim)
    k = F.linear(hidden_states, p["k_proj"]).view(batch_size, q_len, num_heads, head_dim)
    v = F.linear(hidden_states, p["v_proj"]).view(batch_size, q_len, num_heads, head_dim)
    fgate_logit = F.linear(hidden_states, p["fgate_proj"], p["fgate_bias"])
    log_fgate = F.logsigmoid(fgate_logit.to(_at_least_fp32(fgate_logit)))
    o = naive_forgetting_attn(q, k, v, log_fgate, scale=1 / math.sqrt(head_dim))
    o = o.reshape(batch_size, q_len, hidden_size)
    return F.linear(o, p["o_proj"])
