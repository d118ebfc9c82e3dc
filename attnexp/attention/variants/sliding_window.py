from __future__ import annotations

from attnexp.attention.registry import register
from attnexp.attention.variants.mha import MultiHead
from attnexp.config import check


@register
class SlidingWindow(MultiHead):
    """Local attention: each query sees keys at distance < attention.window (Longformer/Mistral).

    The window lives in the MaskSpec the model builds once per forward, so every backend applies
    the same mask (FlexAttention skips whole blocks outside the window).
    """

    name = "sliding_window"
    summary = "local attention, keys within attention.window positions"
    options = {"window": None}

    @classmethod
    def check_config(cls, a, m):
        check(a.window > 0, f"{a.name} needs attention.window > 0 (got {a.window})")
