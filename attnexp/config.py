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



def hub_offline(library_flag: str) -> bool:
    """Whether Hugging Face downloads are switched off: HF_HUB_OFFLINE, or the library's own flag
    (HF_DATASETS_OFFLINE, TRANSFORMERS_OFFLINE)."""
    import os

    return any(os.environ.get(v, "0") not in ("0", "", "false") for v in ("HF_HUB_OFFLINE", library_flag))

@dataclass
class AttentionConfig:
    name: str = "fused"
    mask: str = "causal"  # causal | bidirectional
    backend: str = "sdpa"  # eager | sdpa | flex (linear attention: eager | linear)
    dropout: float = 0.0  # on the attention probabilities
    # Options of single variants (null: the variant's default, or unused); each variant lists the
    # ones it reads in its `options`, and setting one another variant reads is a config error.
    window: int | None = None  # sliding_window: keys within this many positions
    n_kv_heads: int | None = None  # gqa: key/value heads shared by groups of query heads
    rope_base: float | None = None  # rotary, mla: base of the angle frequencies (default 10000)
    eps: float | None = None  # linear, softpick: denominator guard (default 1e-6)
    kv_rank: int | None = None  # mla: width of the joint key/value latent (default 32)
    q_rank: int | None = None  # mla: width of the query latent; 0 = queries not compressed (default 0)
    rope_dim: int | None = None  # mla: per-head width of the decoupled RoPE part of q and k (default 8)
    sigmoid_bias: float | None = None  # sigmoid: the constant b in sigmoid(score + b) (default -log(model.max_len))
    forget_bias_init: float | None = None  # forgetting: the forget gate's initial bias (default 0: f = 0.5, as FoX)

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
    compile: bool = False  # torch.compile the training forward (the map probe keeps the eager modules)
    # Start from pretrained weights: "hf:<hub name or local folder>" (BERT or GPT-2 family, through
    # transformers: pip install 'attnexp[hf]'). Sizes, the fields below and the tokenizer then come
    # from the checkpoint's config.
    init: str | None = None
    norm: str = "pre"  # pre (GPT-2, nanoGPT) | post (BERT: LayerNorm after each residual add)
    ln_eps: float = 1e-5  # LayerNorm eps (BERT: 1e-12)
    activation: str = "gelu"  # gelu | gelu_tanh (GPT-2's "gelu_new")
    type_vocab_size: int = 0  # token-type (segment) embeddings, as BERT's sentence A/B; 0 = none
    embed_norm: bool = False  # a LayerNorm on the summed embeddings (BERT)

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
    # Steps of the warmup + cosine schedule. null: the trainer's estimate at the start of the run,
    # kept when the run resumes (set it to stretch or shorten the schedule of a resumed run).
    total_steps: int | None = None
    nonfinite: str = "stop"  # a NaN/inf training loss: stop (status diverged) | skip (that batch's update)


@dataclass
class MapsConfig:
    enabled: bool = True
    every_n_epochs: int = 1
    n_examples: int = 4  # probe set: the first N validation examples...
    texts: list[str] = field(default_factory=list)  # ...or these texts, encoded by the data's tokenizer
    max_tokens: int = 64  # PNG grids show at most this many tokens a side (the .npz keeps all)
    viewer_tokens: int = 128  # the viewer's heat maps at most this many (its text view shows every token)
    long: str = "blocks"  # longer sequences: blocks (pool neighbouring tokens, the whole map) | first (crop)
    scale: str = "row"  # colour: row (weight / its row's max) | head (/ the head's max) | log | linear (0..1)
    images_to_logger: bool = True  # PNG grids to TensorBoard / wandb (stats are always logged)
    animation: bool = True  # maps/evolution_exK.gif at the end of training
    html: bool = True  # maps/viewer.html at the end of training
    bertviz: bool = False  # also bertviz's head_view / model_view pages of the probe set (pip install 'attnexp[hf]')


@dataclass
class CheckpointConfig:
    monitor: str = "val/loss"  # the metric that picks `best-epochNN.ckpt` (and the checkpoint `test` uses)
    mode: str = "auto"  # auto | min | max  (auto: max for acc/f1/align, min for loss/ppl)
    every_n_steps: int | None = None  # also write checkpoints/step-NNNNNNN.ckpt every N optimizer steps (the latest kept)
    patience: int | None = None  # stop early when `monitor` has not improved for this many validations


ALIGN_BEST = "align/best"  # the best head's alignment score where the data knows the right attention (map callback)


def stage_metrics(task_name: str) -> tuple[str, ...]:
    """The metrics a stage logs as `<stage>/<name>` (lit.py builds them from this list)."""
    return ("loss", "acc", "f1_macro") if task_name == "classify" else ("loss", "acc", "ppl")


@dataclass
class TrainerConfig:
    """lightning.pytorch.Trainer's arguments. conf/trainer/*.yaml sets them; a field left null keeps
    Lightning's default. Any other Trainer argument (`+trainer.profiler=simple`) goes to `extra`."""

    _target_: str = "lightning.pytorch.Trainer"
    accelerator: str | None = None  # auto | cpu | gpu | ...
    devices: int | str | list | None = None
    strategy: str | None = None  # auto | ddp | ddp_spawn | fsdp | ...
    num_nodes: int | None = None
    precision: str | int | None = None  # auto (attnexp: bf16-mixed on a bf16 GPU, else 32-true) or Lightning's
    max_epochs: int | None = None
    max_steps: int | None = None
    max_time: str | None = None  # DD:HH:MM:SS
    gradient_clip_val: float | None = None
    accumulate_grad_batches: int | None = None
    log_every_n_steps: int | None = None
    check_val_every_n_epoch: int | None = None
    limit_train_batches: int | float | None = None
    limit_val_batches: int | float | None = None
    num_sanity_val_steps: int | None = None
    fast_dev_run: bool | int | None = None
    enable_progress_bar: bool | None = None
    enable_model_summary: bool | None = None
    deterministic: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> "TrainerConfig":
        known = {f.name for f in fields(cls)} - {"extra"}
        return from_dict(cls, {**{k: v for k, v in raw.items() if k in known},
                               "extra": {k: v for k, v in raw.items() if k not in known}}, "trainer")

    def kwargs(self) -> dict[str, Any]:
        """The Trainer's keyword arguments (with `_target_` for hydra.utils.instantiate)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra" and getattr(self, f.name) is not None}
        return {**out, **self.extra}


def monitored_metrics(t: TaskConfig, aligned: bool, maps_enabled: bool) -> list[str]:
    """What a run logs at the end of every validation, so `checkpoint.monitor` can be checked up front
    (train/* epoch values arrive after the checkpoint is taken, so they are not offered). `aligned`:
    the data knows where each answer's attention must go (synthetic tasks, the toy agreement task)."""
    names = [f"val/{m}" for m in stage_metrics(t.name)]
    if aligned and maps_enabled:
        names.append(ALIGN_BEST)
    return names


def higher_is_better(metric: str) -> bool:
    """acc, f1_macro, align/best: higher; loss, ppl: lower (checkpoint.mode=auto, `attnexp compare`)."""
    return metric.rsplit("/", 1)[-1] not in ("loss", "ppl", "loss_epoch")


def resolve_checkpoint(c: CheckpointConfig, logged: list[str]) -> CheckpointConfig:
    check(c.monitor in logged, f"checkpoint.monitor={c.monitor!r} is not a metric this run logs at validation; "
                               f"choose one of: {', '.join(logged)}")
    one_of(c.mode, ("auto", "min", "max"), "checkpoint.mode")
    mode = c.mode if c.mode != "auto" else ("max" if higher_is_better(c.monitor) else "min")
    check(c.every_n_steps is None or c.every_n_steps >= 1,
          f"checkpoint.every_n_steps={c.every_n_steps} must be >= 1 (or null: checkpoints at epoch ends only)")
    check(c.patience is None or c.patience >= 1, f"checkpoint.patience={c.patience} must be >= 1 (or null: no early stopping)")
    return CheckpointConfig(monitor=c.monitor, mode=mode, every_n_steps=c.every_n_steps, patience=c.patience)


def validate_maps(m: MapsConfig) -> None:
    check(m.every_n_epochs >= 1, f"maps.every_n_epochs={m.every_n_epochs} must be >= 1")
    check(m.n_examples >= 1, f"maps.n_examples={m.n_examples} must be >= 1")
    check(m.max_tokens >= 2, f"maps.max_tokens={m.max_tokens} must be >= 2")
    check(m.viewer_tokens >= 2, f"maps.viewer_tokens={m.viewer_tokens} must be >= 2")
    one_of(m.long, ("blocks", "first"), "maps.long")
    one_of(m.scale, ("row", "head", "log", "linear"), "maps.scale")
    if m.bertviz:
        import importlib.util

        check(importlib.util.find_spec("bertviz") is not None,
              "maps.bertviz=true needs bertviz: pip install 'attnexp[hf]' (or set maps.bertviz=false)")


_KINDS = {  # the type names used in our dataclasses' annotations -> (accepts, what the message asks for)
    "int": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "float": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "str": (lambda v: isinstance(v, str), "a string"),
    "None": (lambda v: v is None, "null"),
    "list": (lambda v: isinstance(v, (list, tuple)), "a list"),
    "dict": (lambda v: isinstance(v, dict), "a mapping"),
    "Any": (lambda v: True, "anything"),
}


def _check_type(annotation: str, value, key: str):
    """`value` against an annotation such as "int | None" or "list[float]"; ints widen to float."""
    kinds = [t.strip().split("[")[0] for t in annotation.split("|")]
    if not any(_KINDS[k][0](value) for k in kinds):
        want = " or ".join(_KINDS[k][1] for k in kinds)
        raise ConfigError(f"{key}={value!r} must be {want}")
    if "float" in kinds and "int" not in kinds and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def from_dict(cls, raw: dict[str, Any], where: str):
    """Build dataclass `cls` from a plain dict; unknown keys and wrong types are ConfigErrors."""
    names = {f.name: f for f in fields(cls)}
    unknown = sorted(set(raw) - set(names))
    check(not unknown, f"{where}: unknown key(s) {', '.join(unknown)}; valid keys: {', '.join(names)}")
    values = {k: _check_type(names[k].type if isinstance(names[k].type, str) else names[k].type.__name__, v,
                             f"{where}.{k}" if where else k) for k, v in raw.items()}
    return cls(**values)


def one_of(value: str, options, key: str) -> None:
    check(value in options, f"{key}={value!r} is not one of: {', '.join(options)}")


MAX_LEN = 131_072  # longer sequences than this are a typo here, not an experiment
LIMITS = {"d_model": 65_536, "n_heads": 1_024, "n_layers": 1_000, "max_len": MAX_LEN}


def validate_model(m: ModelConfig) -> None:
    for k, most in LIMITS.items():
        check(getattr(m, k) > 0, f"model.{k}={getattr(m, k)} must be positive")
        check(getattr(m, k) <= most, f"model.{k}={getattr(m, k)} is beyond attnexp's limit of {most:,}")
    check(m.d_ff is None or 0 < m.d_ff <= 16 * LIMITS["d_model"], f"model.d_ff={m.d_ff} must be positive (null: 4 * d_model)")
    check(m.d_model % m.n_heads == 0,
          f"model.d_model={m.d_model} is not divisible by model.n_heads={m.n_heads}; "
          f"pick n_heads from {[h for h in range(1, m.d_model + 1) if m.d_model % h == 0 and h <= 64]}")
    check(0 <= m.dropout < 1, f"model.dropout={m.dropout} must be in [0, 1)")
    one_of(m.pos_emb, ("auto", "learned", "none"), "model.pos_emb")
    one_of(m.norm, ("pre", "post"), "model.norm")
    one_of(m.activation, ("gelu", "gelu_tanh"), "model.activation")
    check(m.ln_eps > 0, f"model.ln_eps={m.ln_eps} must be > 0")
    check(m.type_vocab_size >= 0, f"model.type_vocab_size={m.type_vocab_size} must be >= 0")
    check(m.init is None or str(m.init).startswith("hf:"),
          f"model.init={m.init!r}: give hf:<hub name or local folder> (e.g. model.init=hf:bert-base-uncased), or null")


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
    check(o.total_steps is None or o.total_steps >= 1, f"optim.total_steps={o.total_steps} must be >= 1 (or null: from the trainer)")
    one_of(o.nonfinite, ("stop", "skip"), "optim.nonfinite")


def validate_trainer(t: TrainerConfig) -> None:
    """Degenerate runs are refused before anything is built: a run that trains nothing says so."""
    check(t.max_epochs is None or t.max_epochs >= 1 or (t.max_epochs == -1 and (t.max_steps or -1) > 0),
          f"trainer.max_epochs={t.max_epochs} trains nothing; use trainer.max_epochs >= 1 (or -1 with trainer.max_steps)")
    check(t.max_steps is None or t.max_steps == -1 or t.max_steps >= 1,
          f"trainer.max_steps={t.max_steps} trains nothing; use trainer.max_steps >= 1, or -1 for no step limit")
    for k in ("limit_train_batches", "limit_val_batches"):
        v = getattr(t, k)
        check(v is None or v > 0, f"trainer.{k}={v} leaves nothing to run; use a share in (0, 1] or a batch count >= 1")
        check(v is None or isinstance(v, int) or v <= 1, f"trainer.{k}={v}: a float is a share of the batches, at most 1.0")
    for k in ("accumulate_grad_batches", "log_every_n_steps", "check_val_every_n_epoch", "num_nodes"):
        v = getattr(t, k)
        check(v is None or v >= 1, f"trainer.{k}={v} must be >= 1")
    check(t.gradient_clip_val is None or t.gradient_clip_val >= 0, f"trainer.gradient_clip_val={t.gradient_clip_val} must be >= 0")
    check(t.num_sanity_val_steps is None or t.num_sanity_val_steps >= -1,
          f"trainer.num_sanity_val_steps={t.num_sanity_val_steps} must be >= 0 (or -1: the whole validation set)")
    check(t.fast_dev_run is None or isinstance(t.fast_dev_run, bool) or t.fast_dev_run >= 1,
          f"trainer.fast_dev_run={t.fast_dev_run} must be true, false or a batch count >= 1")
