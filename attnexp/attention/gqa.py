from __future__ import annotations

from attnexp.attention import register
from attnexp.attention.fused import FusedMultiHead


@register
class GroupedQuery(FusedMultiHead):
    """Grouped-query attention (Ainslie et al.): n_kv_heads key/value heads, each shared by
    n_heads / n_kv_heads query heads. n_kv_heads=1 is multi-query attention (`attention=mqa`)."""

    name = "gqa"
    summary = "grouped-query / multi-query: attention.n_kv_heads K/V heads shared by query groups"

    def kv_heads(self) -> int:
        return self.cfg.n_kv_heads
