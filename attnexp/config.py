"""Typed configuration: Hydra composes a DictConfig, `load_run` validates it once into these
dataclasses, and everything below the CLI works with plain objects (no DictConfig in model code).

Errors are `ConfigError`s whose message names the key, the bad value and the fix; the CLI prints
them as one line.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any


class ConfigError(ValueError):
    """A configuration mistake the user can fix by changing an override."""


def check(cond: bool, msg: str) -> None:
    if not cond:
        raise ConfigError(msg)


@dataclass
class AttentionConfig:
    name: str = "fused"
    mask: str = "causal"  # causal | bidirectional
    backend: str = "sdpa"  # eager | sdpa | flex (linear attention: eager | linear)
    dropout: float = 0.0  # on the attention probabilities
    window: int | None = None  # sliding_window: keys within this many positions
    n_kv_heads: int | None = None  # gqa: key/value heads shared by groups of query heads
    rope_base: float = 10000.0  # rotary
    eps: float = 1e-6  # linear: denominator guard

    @property
    def causal(self) -> bool:
        return self.mask == "causal"


@dataclass
class ModelConfig:
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int | None = None  # default 4 * d_model
    dropout: float = 0.0
    max_len: int = 128
    pos_emb: str = "auto"  # auto | learned | none  (auto: none when the variant encodes positions)
    tie_embeddings: bool = True

    @property
    def ff_dim(self) -> int:
        return self.d_ff or 4 * self.d_model


@dataclass
class TaskConfig:
    name: str = "lm"  # lm | classify
    objective: str = "auto"  # lm: auto | next | masked  (auto: next if causal, masked if bidirectional)
    mask_prob: float = 0.15  # masked LM: share of real tokens to predict
    pooling: str = "auto"  # classify: auto | cls | mean | last  (auto: last if causal, cls otherwise)


@dataclass
class OptimConfig:
    lr: float = 3e-3
    weight_decay: float = 0.1
    betas: list[float] = field(default_factory=lambda: [0.9, 0.95])
    warmup_steps: int = 50
    min_lr_ratio: float = 0.1  # cosine decays to lr * min_lr_ratio


@dataclass
class MapsConfig:
    enabled: bool = True
    every_n_epochs: int = 1
    n_examples: int = 4  # probe set: the first N validation examples...
    texts: list[str] = field(default_factory=list)  # ...or these texts, encoded by the data's tokenizer
    max_tokens: int = 64  # PNG grids and the HTML viewer show at most this many tokens (the .npz keeps all)
    images_to_logger: bool = True  # PNG grids to TensorBoard / wandb (stats are always logged)
    animation: bool = True  # maps/evolution_exK.gif at the end of training
    html: bool = True  # maps/viewer.html at the end of training


@dataclass
class CheckpointConfig:
    monitor: str = "val/loss"  # the metric that picks `best-epochNN.ckpt` (and the checkpoint `test` uses)
    mode: str = "auto"  # auto | min | max  (auto: max for acc/f1/align, min for loss/ppl)


def monitored_metrics(t: TaskConfig, data_name: str, maps_enabled: bool) -> list[str]:
    """What a run logs at the end of every validation, so `checkpoint.monitor` can be checked up front
    (train/* epoch values arrive after the checkpoint is taken, so they are not offered)."""
    names = ["val/loss", "val/acc", "val/f1_macro" if t.name == "classify" else "val/ppl"]
    if data_name == "synthetic" and maps_enabled:
        names.append("align/best")
    return names


def higher_is_better(metric: str) -> bool:
    """acc, f1_macro, align/best: higher; loss, ppl: lower (checkpoint.mode=auto, `attnexp compare`)."""
    return metric.rsplit("/", 1)[-1] not in ("loss", "ppl", "loss_epoch")


def resolve_checkpoint(c: CheckpointConfig, logged: list[str]) -> CheckpointConfig:
    check(c.monitor in logged, f"checkpoint.monitor={c.monitor!r} is not a metric this run logs at validation; "
                               f"choose one of: {', '.join(logged)}")
    one_of(c.mode, ("auto", "min", "max"), "checkpoint.mode")
    mode = c.mode if c.mode != "auto" else ("max" if higher_is_better(c.monitor) else "min")
    return CheckpointConfig(monitor=c.monitor, mode=mode)


def validate_maps(m: MapsConfig) -> None:
    check(m.every_n_epochs >= 1, f"maps.every_n_epochs={m.every_n_epochs} must be >= 1")
    check(m.n_examples >= 1, f"maps.n_examples={m.n_examples} must be >= 1")
    check(m.max_tokens >= 2, f"maps.max_tokens={m.max_tokens} must be >= 2")


def from_dict(cls, raw: dict[str, Any], where: str):
    """Build dataclass `cls` from a plain dict; unknown keys and wrong types are ConfigErrors."""
    names = {f.name: f for f in fields(cls)}
    unknown = sorted(set(raw) - set(names))
    check(not unknown, f"{where}: unknown key(s) {', '.join(unknown)}; valid keys: {', '.join(names)}")
    out = cls(**raw)
    for f in fields(cls):
        v = getattr(out, f.name)
        want = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        if v is None:
            check("None" in want, f"{where}.{f.name} must not be null")
        elif want.startswith("int") and not isinstance(v, bool):
            check(isinstance(v, int), f"{where}.{f.name}={v!r} must be an integer")
        elif want.startswith("float"):
            check(isinstance(v, (int, float)) and not isinstance(v, bool), f"{where}.{f.name}={v!r} must be a number")
            setattr(out, f.name, float(v))
        elif want.startswith("str"):
            check(isinstance(v, str), f"{where}.{f.name}={v!r} must be a string")
        elif want.startswith("bool"):
            check(isinstance(v, bool), f"{where}.{f.name}={v!r} must be true or false")
    return out


def one_of(value: str, options, key: str) -> None:
    check(value in options, f"{key}={value!r} is not one of: {', '.join(options)}")


def validate_model(m: ModelConfig) -> None:
    for k in ("d_model", "n_heads", "n_layers", "max_len"):
        check(getattr(m, k) > 0, f"model.{k}={getattr(m, k)} must be positive")
    check(m.d_model % m.n_heads == 0,
          f"model.d_model={m.d_model} is not divisible by model.n_heads={m.n_heads}; "
          f"pick n_heads from {[h for h in range(1, m.d_model + 1) if m.d_model % h == 0 and h <= 64]}")
    check(0 <= m.dropout < 1, f"model.dropout={m.dropout} must be in [0, 1)")
    one_of(m.pos_emb, ("auto", "learned", "none"), "model.pos_emb")


def validate_task(t: TaskConfig, a: AttentionConfig) -> None:
    one_of(t.name, ("lm", "classify"), "task.name")
    one_of(t.objective, ("auto", "next", "masked"), "task.objective")
    one_of(t.pooling, ("auto", "cls", "mean", "last"), "task.pooling")
    check(0 < t.mask_prob < 1, f"task.mask_prob={t.mask_prob} must be in (0, 1)")
    if t.name == "lm" and t.objective == "next":
        check(a.causal, "task.objective=next with attention.mask=bidirectional lets every position see the "
                        "token it must predict; use attention.mask=causal or task.objective=masked")
    if t.name == "classify" and t.pooling == "cls":
        check(not a.causal, "task.pooling=cls with causal attention pools a token that saw only itself; "
                            "use task.pooling=last or mean, or attention.mask=bidirectional")


def resolve_task(t: TaskConfig, a: AttentionConfig) -> TaskConfig:
    """Fill the `auto` choices from the mask, so what ran is written down explicitly."""
    obj = t.objective if t.objective != "auto" else ("next" if a.causal else "masked")
    pool = t.pooling if t.pooling != "auto" else ("last" if a.causal else "cls")
    return TaskConfig(name=t.name, objective=obj, mask_prob=t.mask_prob, pooling=pool)


def validate_optim(o: OptimConfig) -> None:
    check(o.lr > 0, f"optim.lr={o.lr} must be positive (e.g. optim.lr=3e-3)")
    check(o.weight_decay >= 0, f"optim.weight_decay={o.weight_decay} must be >= 0")
    check(len(o.betas) == 2 and all(0 <= b < 1 for b in o.betas), f"optim.betas={o.betas} must be two numbers in [0, 1)")
    check(o.warmup_steps >= 0, f"optim.warmup_steps={o.warmup_steps} must be >= 0")
    check(0 <= o.min_lr_ratio <= 1, f"optim.min_lr_ratio={o.min_lr_ratio} must be in [0, 1]")


def register_schemas() -> None:
    """Put the typed schemas in Hydra's ConfigStore; conf/ files inherit them (`/x_schema@_here_`),
    so every key exists on every option and a wrong type fails at compose time."""
    from hydra.core.config_store import ConfigStore

    from attnexp.data.configs import SCHEMAS

    cs = ConfigStore.instance()
    for name, node in [("attention_schema", AttentionConfig), ("model_schema", ModelConfig),
                       ("task_schema", TaskConfig), ("optim_schema", OptimConfig)]:
        cs.store(name=name, node=node)
    for data_name, node in SCHEMAS.items():
        cs.store(name=f"data_{data_name}_schema", node=node)
