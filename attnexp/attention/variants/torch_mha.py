from __future__ import annotations

import torch.nn.functional as F
from torch import nn

from attnexp.attention.base import Attention
from attnexp.attention.kernels import eager
from attnexp.attention.registry import register


@register
class TorchMHA(Attention):
    """`torch.nn.MultiheadAttention` behind our interface.

    Backend `sdpa` calls the module itself (PyTorch dispatches to scaled_dot_product_attention);
    `eager`, and the maps, run attnexp's eager kernel on the module's own projections
    (`_with_weights`), so the test that sdpa equals eager holds nn.MultiheadAttention to them.
    """

    name = "torch_mha"
    summary = "torch.nn.MultiheadAttention wrapped (batch_first, per-head weights)"
    backends = ("eager", "sdpa")
    backends_why = "no flex: nn.MultiheadAttention chooses its own kernel"
    packed_qkv = True  # its in_proj_weight; N(0, 0.02) like every variant's unless attention.qkv_init=xavier

    def __init__(self, d_model, n_heads, cfg):
        super().__init__(d_model, n_heads, cfg)
        self.mha = nn.MultiheadAttention(d_model, n_heads, dropout=cfg.dropout, batch_first=True)

    def qkv_weight(self):
        return self.mha.in_proj_weight

    def init_qkv(self, scheme: str) -> None:
        """Its in_proj_weight is no nn.Linear, so the generic N(0, 0.02) passed it by and it kept
        nn.MultiheadAttention's xavier_uniform_ (4.4x larger at d=64): now drawn like every other
        variant's q/k/v unless attention.qkv_init=xavier asks for torch's."""
        if scheme == "xavier":
            nn.init.xavier_uniform_(self.qkv_weight())
        else:
            nn.init.normal_(self.qkv_weight(), std=0.02)

    def forward(self, x_BTD, mask, need_weights=False, head_mask_H=None):
        if need_weights or self.backend == "eager" or head_mask_H is not None:  # the module cannot silence a head
            y, w = self._with_weights(x_BTD, mask, head_mask_H)
            return y, (w if need_weights else None)
        B, T, _ = x_BTD.shape
        blocked = ~mask.allowed(T, x_BTD.device)  # (B|1, 1, T, T), True = may not attend
        blocked = blocked.expand(B, self.n_heads, T, T).reshape(B * self.n_heads, T, T)
        y, _ = self.mha(x_BTD, x_BTD, x_BTD, attn_mask=blocked, need_weights=False)
        return y, None

    def _with_weights(self, x_BTD, mask, head_mask_H=None):
        """The maps, and the output computed from them, with the module's own projections: the
        weights nn.MultiheadAttention returns are a view taken after it used them, which no
        gradient reaches (explain.py's gradient x attention needs one); the equivalence tests hold
        this path to nn.MultiheadAttention's."""
        m, (B, T, D), H = self.mha, x_BTD.shape, self.n_heads
        qkv = F.linear(x_BTD, m.in_proj_weight, m.in_proj_bias).chunk(3, -1)
        q, k, v = (t.view(B, T, H, D // H).transpose(1, 2) for t in qkv)
        out, w = eager(q, k, v, mask, scale=(D // H) ** -0.5, dropout_p=m.dropout, training=self.training)
        if head_mask_H is not None:
            keep = head_mask_H.to(out.dtype)[None, :, None, None]
            out, w = out * keep, w * keep
        return m.out_proj(out.transpose(1, 2).reshape(B, T, D)), w
