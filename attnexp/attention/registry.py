"""The registry of attention variants: a plain dict from name to class.

A leaf module: each variant imports it and registers itself with `@register`; it imports no
variant by name. The modules under `attnexp/attention/variants/` are imported on first use, so a
new variant is one file there (plus one yaml in conf/attention/) and nothing else to edit; another
package adds one through the entry-point group `attnexp.attention` (attnexp/config/plugins.py).
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import fields, replace

from attnexp.attention.base import Attention
from attnexp.config import AttentionConfig, ConfigError, ModelConfig, check, one_of, plugins

REGISTRY: dict[str, type[Attention]] = {}
ALIASES: dict[str, str] = {}  # an older name -> the variant's name
MASKS = ("causal", "bidirectional")
_SHARED = ("name", "mask", "backend", "dropout", "qkv_init")  # every other AttentionConfig field belongs to some variant
_loaded = False


def register(cls: type[Attention]) -> type[Attention]:
    if cls.name in ALIASES:  # it would be listed and never run: the alias resolves to the other variant
        raise ValueError(f"attention variant {cls.name!r} ({cls.__module__}) takes the name of {ALIASES[cls.name]!r}'s "
                         f"alias; give it a name of its own")
    if REGISTRY.get(cls.name, cls) is not cls:
        raise ValueError(f"attention variant {cls.name!r} is registered twice: {REGISTRY[cls.name].__module__} "
                         f"and {cls.__module__}")
    # Only the aliases the class declares itself: a subclass inherits its parent's tuple, and
    # taking it would hand the parent's older name to whichever subclass registers last.
    own = cls.__dict__.get("aliases", ())
    for alias in own:
        if ALIASES.get(alias, cls.name) != cls.name or alias in REGISTRY:
            raise ValueError(f"attention alias {alias!r} of {cls.name!r} is already claimed by "
                             f"{ALIASES.get(alias, alias)!r}")
    REGISTRY[cls.name] = cls
    for alias in own:
        ALIASES[alias] = cls.name
    return cls


def registered() -> dict[str, type[Attention]]:
    """Every registered variant by name (sorted); imports attnexp/attention/variants/* and the
    installed plugins' modules (entry points `attnexp.attention`) once."""
    global _loaded
    if not _loaded:
        package = importlib.import_module("attnexp.attention.variants")
        for mod in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
            importlib.import_module(f"{package.__name__}.{mod.name}")
        _loaded = True
        plugins.load("attnexp.attention")  # installed packages' variants (docs/extending.md)
    return {name: REGISTRY[name] for name in sorted(REGISTRY)}


def canonical(name: str) -> str:
    """A variant's name, given it or one of its aliases (an older name)."""
    registered()
    return ALIASES.get(name, name)


def get(name: str) -> type[Attention]:
    name = canonical(name)
    if name not in registered():
        raise ValueError(f"Unknown attention variant {name!r}; registered: {', '.join(registered())}")
    return REGISTRY[name]


def with_defaults(cfg: AttentionConfig, m: ModelConfig | None = None) -> AttentionConfig:
    """The config with the variant's own defaults filled in for the options it leaves unset: the
    fixed ones, then (given the model's sizes) those that depend on them (sigmoid's bias)."""
    cls = get(cfg.name)
    cfg = replace(cfg, **{k: v for k, v in cls.options.items() if getattr(cfg, k) is None and v is not None})
    if m is None:
        return cfg
    return replace(cfg, **{k: v for k, v in cls.model_defaults(m).items() if getattr(cfg, k) is None})


def build(d_model: int, n_heads: int, cfg: AttentionConfig, layer: int = 0, m: ModelConfig | None = None) -> Attention:
    """One layer of variant `cfg.name`; `m` fills the options whose default depends on the model."""
    mod = get(cfg.name)(d_model, n_heads, with_defaults(cfg, m))
    mod.set_layer(layer)
    return mod


def validate(a: AttentionConfig, m: ModelConfig, training_on_cpu: bool | None = None) -> AttentionConfig:
    """Reject impossible combinations with a message that lists what is possible; returns the
    config with the variant's defaults filled in (what the run will use)."""
    reg = registered()
    a = replace(a, name=canonical(a.name))
    check(a.name in reg, f"attention.name={a.name!r} is not a registered variant; choose one of: {', '.join(reg)}")
    cls = reg[a.name]
    one_of(a.mask, MASKS, "attention.mask")
    check(a.backend in cls.backends,
          f"attention.backend={a.backend!r} is not available for {a.name}; it runs on: {', '.join(cls.backends)}")
    check(0 <= a.dropout < 1, f"attention.dropout={a.dropout} must be in [0, 1)")
    one_of(a.qkv_init, ("normal", "xavier"), "attention.qkv_init")
    check(a.qkv_init == "normal" or cls.packed_qkv,
          f"attention.qkv_init={a.qkv_init} needs one packed q/k/v projection, which {a.name} does not have; "
          f"use it with {', '.join(n for n, c in reg.items() if c.packed_qkv)}")
    if a.backend == "flex":
        check(a.dropout == 0, "attention.backend=flex has no attention dropout; set attention.dropout=0 or use backend=sdpa")
        check(not training_on_cpu, "attention.backend=flex trains only on CUDA (FlexAttention has no backward on CPU); "
                                   "use attention.backend=sdpa or eager here, or trainer=gpu on a GPU machine")
    for f in fields(AttentionConfig):
        if f.name in _SHARED or getattr(a, f.name) is None or f.name in cls.options:
            continue
        users = [n for n, c in reg.items() if f.name in c.options]
        raise ConfigError(f"attention.{f.name} only applies to {', '.join(users)}, not {a.name}; "
                          f"use attention={users[0]} or drop the override")
    a = with_defaults(a, m)
    for k, _default in cls.options.items():
        check(getattr(a, k) is not None, f"attention={a.name} needs attention.{k} (e.g. attention.{k}=...)")
    cls.check_config(a, m)
    return a


def matrix() -> list[dict]:
    """One row per variant: what it supports (printed by `python -m attnexp variants`)."""
    return [dict(variant=n, masks=", ".join(MASKS), backends=", ".join(c.backends),
                 rows=c.rows, why=c.backends_why, positions="own" if c.positional else "learned", about=c.summary)
            for n, c in registered().items()]
