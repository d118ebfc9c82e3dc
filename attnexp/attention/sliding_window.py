from __future__ import annotations

from attnexp.attention import register
from attnexp.attention.fused import FusedMultiHead


@register
class SlidingWindow(FusedMultiHead):
    """Local attention: each query sees keys at distance < attention.window (Longformer/Mistral).

    The window lives in the MaskSpec the model builds once per forward, so every backend applies
    the same mask (FlexAttention skips whole blocks outside the window).
    """

    name = "sliding_window"
    summary = "local attention, keys within attention.window positions"
    uses_window = True
