from __future__ import annotations

from attnexp.attention.registry import register
from attnexp.attention.variants.mha import MultiHead
from attnexp.config import check


@register
class GroupedQuery(MultiHead):
    """Grouped-query attention (Ainslie et al.): n_kv_heads key/value heads, each shared by
    n_heads / n_kv_heads query heads. n_kv_heads=1 is multi-query attention (`attention=mqa`)."""

    name = "gqa"
    summary = "grouped-query / multi-query: attention.n_kv_heads K/V heads shared by query groups"
    options = {"n_kv_heads": None}

    @classmethod
    def check_config(cls, a, m):
        kv = a.n_kv_heads
        check(kv > 0 and m.n_heads % kv == 0, f"attention.n_kv_heads={kv} must divide model.n_heads={m.n_heads}; "
                                              f"choose from {[g for g in range(1, m.n_heads + 1) if m.n_heads % g == 0]}")

    def kv_heads(self) -> int:
        return self.cfg.n_kv_heads
