from __future__ import annotations

from typing import ClassVar

from torch import Tensor, nn

from attnexp.attention.kernels import BACKENDS
from attnexp.attention.masking import MaskSpec
from attnexp.config import AttentionConfig


class Attention(nn.Module):
    """Interface of every variant. Subclasses set the class attributes and `forward`."""

    name: ClassVar[str]
    summary: ClassVar[str]
    backends: ClassVar[tuple[str, ...]] = BACKENDS
    softmax: ClassVar[bool] = True  # weights are a softmax over allowed keys
    returns_weights: ClassVar[bool] = True
    positional: ClassVar[bool] = False  # encodes positions itself: no learned position embedding needed
    uses_window: ClassVar[bool] = False

    def __init__(self, d_model: int, n_heads: int, cfg: AttentionConfig):
        super().__init__()
        self.d_model, self.n_heads, self.cfg = d_model, n_heads, cfg
        self.backend = cfg.backend

    def forward(self, x_BTD: Tensor, mask: MaskSpec, need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        raise NotImplementedError
