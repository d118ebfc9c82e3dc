"""apple/ml-sigmoid-attention, flash_sigmoid/tests/test_flash_attn.py, `attention_ref` and
`construct_local_mask` (Apple sample-code licence), commit 1a201a3361b46218e59db6068b40ebad67bbde83:
the reference their FlashSigmoid kernel is tested against.

Changed: einops' rearrange/repeat written with torch; dropout (p = 0 here), reorder_ops and
attn_bias left out; called with upcast=False (float64 inputs). The bias their configs use:
attention_simulator/examples/language_modeling/configs/
experiment_realnews_transformer_bf16_flash_sigmoid_multilayer_rope.yaml, `sigmoid_bias: -7.62`
beside `max_seq_len: 2048` (-ln 2048 = -7.6246)."""

from __future__ import annotations

import math

import torch

SIGMOID_BIAS_AT_2048 = -7.62
MAX_SEQ_LEN = 2048


def construct_local_mask(seqlen_q, seqlen_k, window_size=(-1, -1), query_padding_mask=None, key_padding_mask=None, device=None):
    row_idx = torch.arange(seqlen_q, device=device, dtype=torch.long)[:, None]
    col_idx = torch.arange(seqlen_k, device=device, dtype=torch.long)
    sk = seqlen_k if key_padding_mask is None else key_padding_mask.sum(-1)[:, None, None, None]
    sq = seqlen_q if query_padding_mask is None else query_padding_mask.sum(-1)[:, None, None, None]
    if window_size[0] < 0:
        return col_idx > row_idx + sk - sq + window_size[1]
    sk = torch.full_like(col_idx, seqlen_k) if key_padding_mask is None else sk
    return torch.logical_or(col_idx > torch.minimum(row_idx + sk - sq + window_size[1], sk),
                            col_idx < row_idx + sk - sq - window_size[0])


def attention_ref(q, k, v, query_padding_mask=None, key_padding_mask=None, causal=False, window_size=(-1, -1),
                  upcast=True, sigmoid_bias=None):
    """q, k, v: (batch, seqlen, nheads, head_dim) -> output (batch, seqlen, nheads, head_dim), attention (b, h, q, k)."""
    if causal:
        window_size = (window_size[0], 0)
    dtype_og = q.dtype
    if upcast:
        q, k, v = q.float(), k.float(), v.float()
    seqlen_q, seqlen_k = q.shape[1], k.shape[1]
    d = q.shape[-1]
    scores = torch.einsum("bthd,bshd->bhts", q / math.sqrt(d), k)
    if key_padding_mask is not None:
        scores.masked_fill_((~key_padding_mask)[:, None, None, :], float("-inf"))
    if window_size[0] >= 0 or window_size[1] >= 0:
        local_mask = construct_local_mask(seqlen_q, seqlen_k, window_size, query_padding_mask, key_padding_mask, q.device)
        scores.masked_fill_(local_mask, float("-inf"))

    scores += sigmoid_bias

    attention = torch.sigmoid(scores).to(v.dtype)  # Softmax -> Sigmoid
    if window_size[0] >= 0 or window_size[1] >= 0:
        attention = attention.masked_fill(torch.all(local_mask, dim=-1, keepdim=True), 0.0)
    if query_padding_mask is not None:
        attention = attention.masked_fill((~query_padding_mask)[:, None, :, None], 0.0)
    output = torch.einsum("bhts,bshd->bthd", attention, v)
    if query_padding_mask is not None:
        output.masked_fill_((~query_padding_mask)[:, :, None, None], 0.0)
    return output.to(dtype=dtype_og), attention.to(dtype=dtype_og)
