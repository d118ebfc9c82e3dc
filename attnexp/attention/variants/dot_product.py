from __future__ import annotations

from attnexp.attention.base import Attention
from attnexp.attention.kernels import attend
from attnexp.attention.registry import register


@register
class DotProduct(Attention):
    """softmax(E Eᵀ / √d) E: no parameters at all, the embeddings are queries, keys and values."""

    name = "dot_product"
    summary = "plain dot-product self-attention, no projections"

    def forward(self, x_BTD, mask, need_weights=False, head_mask_H=None):
        x_B1TD = x_BTD[:, None]
        out, w = attend(x_B1TD, x_B1TD, x_B1TD, mask, backend=self.backend, dropout_p=self.cfg.dropout,
                        training=self.training, need_weights=need_weights)
        if head_mask_H is not None:  # its one head silenced: no attention output at all
            out, w = out * head_mask_H[0], None if w is None else w * head_mask_H[0]
        return out[:, 0], w
