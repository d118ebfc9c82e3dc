"""Attention variants: a plain registry from name to module class.

Every variant has the same call, `forward(x_BTD, mask: MaskSpec, need_weights=False) ->
(y_BTD, weights_BHTT | None)`, and class attributes that say what it supports. Register a new
one with `@register` and the property tests in tests/test_attention.py cover it at once.
"""

from __future__ import annotations

from attnexp.attention.base import Attention
from attnexp.attention.masking import MaskSpec
from attnexp.config import AttentionConfig, ModelConfig, check, one_of

REGISTRY: dict[str, type[Attention]] = {}


def register(cls: type[Attention]) -> type[Attention]:
    REGISTRY[cls.name] = cls
    return cls


def get(name: str) -> type[Attention]:
    if name not in REGISTRY:
        raise ValueError(f"Unknown attention variant {name!r}; registered: {', '.join(REGISTRY)}")
    return REGISTRY[name]


def build(d_model: int, n_heads: int, cfg: AttentionConfig) -> Attention:
    return get(cfg.name)(d_model, n_heads, cfg)


def validate(a: AttentionConfig, m: ModelConfig, training_on_cpu: bool | None = None) -> None:
    """Reject impossible combinations with a message that lists what is possible."""
    check(a.name in REGISTRY, f"attention.name={a.name!r} is not a registered variant; choose one of: {', '.join(REGISTRY)}")
    cls = REGISTRY[a.name]
    one_of(a.mask, ("causal", "bidirectional"), "attention.mask")
    check(a.backend in cls.backends,
          f"attention.backend={a.backend!r} is not available for {a.name}; it runs on: {', '.join(cls.backends)}")
    check(0 <= a.dropout < 1, f"attention.dropout={a.dropout} must be in [0, 1)")
    if a.backend == "flex":
        check(a.dropout == 0, "attention.backend=flex has no attention dropout; set attention.dropout=0 or use backend=sdpa")
        check(not training_on_cpu, "attention.backend=flex trains only on CUDA (FlexAttention has no backward on CPU); "
                                   "use attention.backend=sdpa or eager here, or trainer=gpu on a GPU machine")
    if cls.uses_window:
        check(a.window is not None and a.window > 0, f"{a.name} needs attention.window > 0 (got {a.window})")
    else:
        check(a.window is None, f"attention.window only applies to sliding_window, not {a.name}; use attention=sliding_window")
    if a.name == "gqa":
        kv = a.n_kv_heads
        check(kv is not None and kv > 0 and m.n_heads % kv == 0,
              f"attention.n_kv_heads={kv} must divide model.n_heads={m.n_heads}; "
              f"choose from {[g for g in range(1, m.n_heads + 1) if m.n_heads % g == 0]}")
    else:
        check(a.n_kv_heads is None, f"attention.n_kv_heads only applies to gqa, not {a.name}; use attention=gqa or mqa")
    if a.name == "rotary":
        check((m.d_model // m.n_heads) % 2 == 0, f"rotary needs an even head size; d_model/n_heads = {m.d_model // m.n_heads}")


def matrix() -> list[dict]:
    """One row per variant: what it supports (printed by `python -m attnexp variants`)."""
    return [dict(variant=n, masks="causal, bidirectional", backends=", ".join(c.backends),
                 weights="yes" if c.returns_weights else "no", softmax="yes" if c.softmax else "no",
                 positions="own" if c.positional else "learned", about=c.summary)
            for n, c in REGISTRY.items()]


# Importing the variant modules fills the registry (order = order shown to users).
from attnexp.attention import (  # noqa: E402,F401
    dot_product, single_head, multi_head_list, fused, torch_mha, sliding_window, alibi, rotary, gqa, linear,
)

__all__ = ["Attention", "MaskSpec", "REGISTRY", "register", "get", "build", "validate", "matrix"]
