from __future__ import annotations

from typing import Any, ClassVar

from torch import Tensor, nn

from attnexp.attention.kernels import BACKENDS
from attnexp.attention.masking import MaskSpec
from attnexp.config import AttentionConfig, ModelConfig


class Attention(nn.Module):
    """Interface of every variant: `forward(x_BTD, mask, need_weights, head_mask_H) -> (y_BTD, weights_BHTT | None)`.

    Subclasses set the class attributes, `forward`, and where they have rules of their own,
    `check_config`; the registry calls it when a config is validated."""

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()  # older names that still select it (configs, checkpoints)
    summary: ClassVar[str]
    backends: ClassVar[tuple[str, ...]] = BACKENDS
    softmax: ClassVar[bool] = True  # each row is a softmax over allowed keys (so shift-invariant)
    # What a row of the weights sums to, said in `attnexp variants`, the maps' legends and stats:
    # "1", "at most 1" (mass may go to no token), "any (>= 0)" (unnormalised) or "signed".
    rows: ClassVar[str] = "1"
    backends_why: ClassVar[str] = ""  # why a variant lacks the fused backends, shown by `attnexp variants`
    positional: ClassVar[bool] = False  # encodes positions itself: no learned position embedding needed
    packed_qkv: ClassVar[bool] = False  # one q/k/v projection, `qkv_weight()` (attention.qkv_init applies)
    # AttentionConfig fields this variant reads, with its default (None: the user must set it);
    # setting one of them for a variant that does not read it is a config error.
    options: ClassVar[dict[str, Any]] = {}

    def __init__(self, d_model: int, n_heads: int, cfg: AttentionConfig):
        super().__init__()
        self.d_model, self.n_heads, self.cfg = d_model, n_heads, cfg
        self.backend = cfg.backend

    @classmethod
    def flops_per_query(cls, a: AttentionConfig, T: int, d_model: int, n_heads: int) -> float:
        """Forward FLOPs of the score and weighted-sum products for one query position, all heads
        (a multiply-add is 2): q·k for every key it sees, then the weights times v. Causal counts
        the half of the score matrix it computes, a window its window. attnexp.model.flops sums
        this into MFU; a variant with other products overrides it."""
        return 2 * 2 * cls.keys_per_query(a, T) * d_model

    @staticmethod
    def keys_per_query(a: AttentionConfig, T: int) -> float:
        keys = min(a.window, T) if a.window else T
        return (keys + 1) / 2 if a.causal else keys  # causal: on average over a sequence's queries

    @classmethod
    def model_defaults(cls, m: ModelConfig) -> dict[str, Any]:
        """Defaults of options that depend on the model's sizes (listed in `options` as None),
        e.g. sigmoid's bias -log(model.max_len)."""
        return {}

    def initialise(self) -> None:
        """Called after the model's generic initialisation (normal(0, 0.02) weights, zero biases)
        for parameters this variant initialises its own way (the forget gate's bias)."""

    def qkv_weight(self):
        """The packed q/k/v projection's weight (variants with `packed_qkv`)."""
        raise NotImplementedError(f"{self.name} has no packed q/k/v projection")

    def init_qkv(self, scheme: str) -> None:
        """attention.qkv_init, after the generic initialisation (which drew every nn.Linear from
        N(0, 0.02): `normal` is that already); `xavier` is torch.nn.MultiheadAttention's
        xavier_uniform_ over the packed matrix."""
        if self.packed_qkv and scheme == "xavier":
            nn.init.xavier_uniform_(self.qkv_weight())

    def set_layer(self, layer: int) -> None:
        """Told its block's index (0-based) after construction; for variants whose initialisation
        depends on depth (differential attention's lambda_init)."""

    @classmethod
    def check_config(cls, a: AttentionConfig, m: ModelConfig) -> None:
        """Raise a ConfigError for settings this variant cannot run (options already filled in)."""

    def forward(self, x_BTD: Tensor, mask: MaskSpec, need_weights: bool = False,
                head_mask_H: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """head_mask_H: 1 keeps a head, 0 silences it (its output zeroed before the heads are
        combined; its returned weights too): how head importance is measured."""
        raise NotImplementedError
