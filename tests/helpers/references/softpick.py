"""zaydzuhri/softpick-attention, naive_softpick_attn.py, `softpick` and `naive_softpick_attn`,
commit eeeae0549ee40b32d708d19805895932cd352a69 (the repository states no licence; only these
few lines are transcribed, as a test reference). Their flash kernel (flash_softpick_attn.py, same
repository) adds a hard-coded eps of 1e-6 to the shifted denominator, attnexp's default.

Changed: einops' rearrange written with torch (head_first=True: q, k, v are (b, h, t, d)); the
float32 upcast as in references/__init__.py."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from helpers.references import _at_least_fp32


def softpick(x, dim=-1, eps=1e-8):
    # softpick function: relu(exp(x)-1) / sum(abs(exp(x)-1))
    # numerically stable version
    x_m = torch.max(x, dim=dim, keepdim=True).values
    x_m_e_m = torch.exp(-x_m)
    x_e_1 = torch.exp(x - x_m) - x_m_e_m
    r_x_e_1 = F.relu(x_e_1)
    a_x_e_1 = torch.where(x.isfinite(), torch.abs(x_e_1), 0)
    return r_x_e_1 / (torch.sum(a_x_e_1, dim=dim, keepdim=True) + eps)


def naive_softpick_attn(q, k, v, scale=None, eps=1e-8):
    head_dim = q.shape[-1]
    if scale is None:
        scale = 1.0 / (head_dim ** 0.5)
    q_len = q.shape[-2]
    k_len = k.shape[-2]
    mask = torch.tril(torch.ones(k_len, k_len, device=q.device))
    wei = torch.matmul(q, k.transpose(2, 3))
    wei = wei * scale
    wei = wei.masked_fill(mask[k_len - q_len:k_len, :k_len] == 0, float("-inf"))
    wei = softpick(wei.to(_at_least_fp32(wei)), dim=-1, eps=eps).to(q.dtype)
    o = torch.matmul(wei, v)
    return o, wei
