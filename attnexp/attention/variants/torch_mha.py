from __future__ import annotations

from torch import nn

from attnexp.attention.base import Attention
from attnexp.attention.registry import register


@register
class TorchMHA(Attention):
    """`torch.nn.MultiheadAttention` behind our interface.

    Backend `eager` calls it with need_weights=True (its math path); `sdpa` with need_weights=False,
    where PyTorch dispatches to scaled_dot_product_attention itself.
    """

    name = "torch_mha"
    summary = "torch.nn.MultiheadAttention wrapped (batch_first, per-head weights)"
    backends = ("eager", "sdpa")
    backends_why = "no flex: nn.MultiheadAttention chooses its own kernel"

    def __init__(self, d_model, n_heads, cfg):
        super().__init__(d_model, n_heads, cfg)
        self.mha = nn.MultiheadAttention(d_model, n_heads, dropout=cfg.dropout, batch_first=True)

    def forward(self, x_BTD, mask, need_weights=False):
        B, T, _ = x_BTD.shape
        blocked = ~mask.allowed(T, x_BTD.device)  # (B|1, 1, T, T), True = may not attend
        blocked = blocked.expand(B, self.n_heads, T, T).reshape(B * self.n_heads, T, T)
        want = need_weights or self.backend == "eager"
        y, w = self.mha(x_BTD, x_BTD, x_BTD, attn_mask=blocked, need_weights=want, average_attn_weights=False)
        return y, (w if need_weights else None)
