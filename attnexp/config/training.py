"""What a run trains: the task, the optimizer, the map logging, checkpoints and Lightning's
Trainer, each a dataclass with its checks (`validate`) and, where a choice is `auto`, the
resolved form written down as what ran (`resolved`)."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field, fields, replace
from typing import Any

from attnexp.config.checks import check, from_dict, one_of
from attnexp.config.metrics import higher_is_better
from attnexp.config.model import AttentionConfig

# maps.scale and maps.long: the allowed values, said once (the renderers in maps/ read them here)
MAP_SCALES = {
    "row": "weight / its row's largest",
    "head": "weight / the head's largest",
    "log": "log10 weight, 1e-4 to 1",
    "linear": "weight, 0 to 1",
}
MAP_LONG = ("blocks", "first")


@dataclass
class TaskConfig:
    name: str = "lm"  # lm | classify
    objective: str = "auto"  # lm: auto | next | masked  (auto: next if causal, masked if bidirectional)
    mask_prob: float = 0.15  # masked LM: share of real tokens to predict
    pooling: str = "auto"  # classify: auto | cls | mean | last  (auto: last if causal, cls otherwise)

    def validate(self, a: AttentionConfig) -> None:
        one_of(self.name, ("lm", "classify"), "task.name")
        one_of(self.objective, ("auto", "next", "masked"), "task.objective")
        one_of(self.pooling, ("auto", "cls", "mean", "last"), "task.pooling")
        check(0 < self.mask_prob < 1, f"task.mask_prob={self.mask_prob} must be in (0, 1)")
        if self.name == "lm" and self.objective == "next":
            check(a.causal, "task.objective=next with attention.mask=bidirectional lets every position see the "
                            "token it must predict; use attention.mask=causal or task.objective=masked")
        if self.name == "classify" and self.pooling == "cls":
            check(not a.causal, "task.pooling=cls with causal attention pools a token that saw only itself; "
                                "use task.pooling=last or mean, or attention.mask=bidirectional")

    def resolved(self, a: AttentionConfig) -> TaskConfig:
        """The `auto` choices filled from the mask, so what ran is written down explicitly."""
        obj = self.objective if self.objective != "auto" else ("next" if a.causal else "masked")
        pool = self.pooling if self.pooling != "auto" else ("last" if a.causal else "cls")
        return replace(self, objective=obj, pooling=pool)


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
    freeze_encoder: bool = False  # train the task head only (a frozen pretrained encoder: task=classify)

    def validate(self) -> None:
        check(self.lr > 0, f"optim.lr={self.lr} must be positive (e.g. optim.lr=3e-3)")
        check(self.weight_decay >= 0, f"optim.weight_decay={self.weight_decay} must be >= 0")
        check(len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas),
              f"optim.betas={self.betas} must be two numbers in [0, 1)")
        check(self.warmup_steps >= 0, f"optim.warmup_steps={self.warmup_steps} must be >= 0")
        check(0 <= self.min_lr_ratio <= 1, f"optim.min_lr_ratio={self.min_lr_ratio} must be in [0, 1]")
        check(self.total_steps is None or self.total_steps >= 1,
              f"optim.total_steps={self.total_steps} must be >= 1 (or null: from the trainer)")
        one_of(self.nonfinite, ("stop", "skip"), "optim.nonfinite")


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
    # the weights' type in each snapshot (.npz): float16 (half the disk; a weight is off by at most 2^-11
    # of itself, about 4.9e-4, and one below ~3e-8 is stored as 0) or float32 (exact, twice the size)
    dtype: str = "float16"
    images_to_logger: bool = True  # PNG grids to TensorBoard / wandb (stats are always logged)
    # Per-head scalars (attn/L{l}H{h}/<stat>: ~21 a head, ~3,000 charts at GPT-2's 144 heads) are opt-in;
    # by default each statistic is a per-layer mean scalar and a histogram over every head per epoch
    head_scalars: bool = False
    animation: bool = True  # maps/evolution_exK.gif at the end of training
    html: bool = True  # maps/viewer.html at the end of training
    # the pictures (grids, head tables, the timeline, GIF frames) drawn on a worker thread while training
    # goes on; the numbers are taken on the training thread either way (false: pictures drawn there too)
    background: bool = True
    bertviz: bool = False  # also bertviz's head_view / model_view pages of the probe set (pip install 'attnexp[hf]')
    # What the heads do and which matter (attnexp.heads.analysis), with every snapshot:
    roles: bool = True  # pattern scores and a role per head (previous, first, induction on causal models, ...)
    importance: bool = False  # loss change with each head / layer silenced, on a fixed validation batch (L*H+L+1 forwards)
    importance_examples: int = 64  # ...of this many validation examples
    rollout: bool = True  # attention rollout through every layer (Abnar & Zuidema 2020)
    flow: bool = False  # attention flow: exact max-flow, n^2 problems an example (costly; needs scipy)
    relevance: bool = True  # classifiers: each token's relevance to the predicted / true class (Chefer et al. 2021)
    # The heads over training (attnexp.heads.timeline): a light reading of every head's numbers on the probe
    # batch (no pictures) after these steps, appended to maps/timeline.jsonl: `timeline_points` steps spaced
    # evenly in log(step) (dense early, where heads form), or every `every_n_steps` steps when that is set
    timeline: bool = True
    timeline_points: int = 64
    every_n_steps: int = 0
    # the steps where each head became what it is (ruptures' PELT): null = when ruptures is installed
    # (pip install 'attnexp[timeline]'), true = required, false = off
    change_points: bool | None = None
    # The local learning coefficient over training (attnexp.heads.llc; devinterp's SGLD, pip install
    # 'attnexp[llc]'; next-token models): estimated at `llc_readings` of the timeline's readings, evenly
    # among them, on `llc_examples` training windows; each estimate is llc_chains x llc_draws forward-backward
    # passes. The SGLD settings: scripts/studies/llc_calibration.py's choice (docs/maps.md)
    llc: bool = False
    llc_readings: int = 16
    llc_examples: int = 1024
    llc_lr: float = 1e-3
    llc_nbeta: float = 10.0
    llc_localization: float = 100.0
    llc_chains: int = 4
    llc_draws: int = 100

    def validate(self) -> None:
        check(self.every_n_epochs >= 1, f"maps.every_n_epochs={self.every_n_epochs} must be >= 1")
        check(self.n_examples >= 1, f"maps.n_examples={self.n_examples} must be >= 1")
        check(self.max_tokens >= 2, f"maps.max_tokens={self.max_tokens} must be >= 2")
        check(self.viewer_tokens >= 2, f"maps.viewer_tokens={self.viewer_tokens} must be >= 2")
        one_of(self.long, MAP_LONG, "maps.long")
        one_of(self.scale, tuple(MAP_SCALES), "maps.scale")
        one_of(self.dtype, ("float16", "float32"), "maps.dtype")
        check(self.importance_examples >= 1, f"maps.importance_examples={self.importance_examples} must be >= 1")
        check(self.timeline_points >= 2, f"maps.timeline_points={self.timeline_points} must be >= 2")
        check(self.every_n_steps >= 0, f"maps.every_n_steps={self.every_n_steps} must be >= 0 (0: the log-spaced schedule)")
        check(not self.change_points or importlib.util.find_spec("ruptures") is not None,  # heads.changes.NEEDS
              "maps.change_points=true: change points need ruptures: pip install 'attnexp[timeline]' "
              "(or set maps.change_points=false)")
        for key in ("llc_readings", "llc_examples", "llc_chains", "llc_draws"):
            check(getattr(self, key) >= 1, f"maps.{key}={getattr(self, key)} must be >= 1")
        for key in ("llc_lr", "llc_nbeta", "llc_localization"):
            check(getattr(self, key) > 0 or key == "llc_localization" and getattr(self, key) == 0,
                  f"maps.{key}={getattr(self, key)} must be > 0")
        check(not self.llc or self.timeline, "maps.llc=true is estimated at the timeline's readings; set maps.timeline=true")
        for key, on, module, extra in (("flow", self.flow, "scipy", "explain"), ("bertviz", self.bertviz, "bertviz", "hf"),
                                       ("llc", self.llc, "devinterp", "llc")):
            check(not on or importlib.util.find_spec(module) is not None,
                  f"maps.{key}=true needs {module}: pip install 'attnexp[{extra}]' (or set maps.{key}=false)")


@dataclass
class CheckpointConfig:
    monitor: str = "val/loss"  # the metric that picks `best-epochNN.ckpt` (and the checkpoint `test` uses)
    mode: str = "auto"  # auto | min | max  (auto: max for acc/f1/align, min for loss/ppl)
    every_n_steps: int | None = None  # also write checkpoints/step-NNNNNNN.ckpt every N optimizer steps (the latest kept)
    patience: int | None = None  # stop early when `monitor` has not improved for this many validations

    def resolved(self, logged: list[str]) -> CheckpointConfig:
        """Checked against the metrics the run logs (`logged`), with mode=auto made explicit."""
        check(self.monitor in logged, f"checkpoint.monitor={self.monitor!r} is not a metric this run logs at validation; "
                                      f"choose one of: {', '.join(logged)}")
        one_of(self.mode, ("auto", "min", "max"), "checkpoint.mode")
        mode = self.mode if self.mode != "auto" else ("max" if higher_is_better(self.monitor) else "min")
        check(self.every_n_steps is None or self.every_n_steps >= 1,
              f"checkpoint.every_n_steps={self.every_n_steps} must be >= 1 (or null: checkpoints at epoch ends only)")
        check(self.patience is None or self.patience >= 1,
              f"checkpoint.patience={self.patience} must be >= 1 (or null: no early stopping)")
        return replace(self, mode=mode)


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
    def from_raw(cls, raw: dict[str, Any]) -> TrainerConfig:
        known = {f.name for f in fields(cls)} - {"extra"}
        return from_dict(cls, {**{k: v for k, v in raw.items() if k in known},
                               "extra": {k: v for k, v in raw.items() if k not in known}}, "trainer")

    def kwargs(self) -> dict[str, Any]:
        """The Trainer's keyword arguments (with `_target_` for hydra.utils.instantiate)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra" and getattr(self, f.name) is not None}
        return {**out, **self.extra}

    def validate(self) -> None:
        """Degenerate runs are refused before anything is built: a run that trains nothing says so."""
        check(self.max_epochs is None or self.max_epochs >= 1 or (self.max_epochs == -1 and (self.max_steps or -1) > 0),
              f"trainer.max_epochs={self.max_epochs} trains nothing; use trainer.max_epochs >= 1 (or -1 with trainer.max_steps)")
        check(self.max_steps is None or self.max_steps == -1 or self.max_steps >= 1,
              f"trainer.max_steps={self.max_steps} trains nothing; use trainer.max_steps >= 1, or -1 for no step limit")
        for k in ("limit_train_batches", "limit_val_batches"):
            v = getattr(self, k)
            check(v is None or v > 0, f"trainer.{k}={v} leaves nothing to run; use a share in (0, 1] or a batch count >= 1")
            check(v is None or isinstance(v, int) or v <= 1, f"trainer.{k}={v}: a float is a share of the batches, at most 1.0")
        for k in ("accumulate_grad_batches", "log_every_n_steps", "check_val_every_n_epoch", "num_nodes"):
            v = getattr(self, k)
            check(v is None or v >= 1, f"trainer.{k}={v} must be >= 1")
        check(self.gradient_clip_val is None or self.gradient_clip_val >= 0,
              f"trainer.gradient_clip_val={self.gradient_clip_val} must be >= 0")
        check(self.num_sanity_val_steps is None or self.num_sanity_val_steps >= -1,
              f"trainer.num_sanity_val_steps={self.num_sanity_val_steps} must be >= 0 (or -1: the whole validation set)")
        check(self.fast_dev_run is None or isinstance(self.fast_dev_run, bool) or self.fast_dev_run >= 1,
              f"trainer.fast_dev_run={self.fast_dev_run} must be true, false or a batch count >= 1")
        # ddp_spawn trains in child processes whose callbacks are copies: the run's record (history,
        # steps, best checkpoint), its maps and its stop handling stayed there, and summary.json said
        # `completed` with 0 epochs (a sweep or Optuna then saw an empty run)
        # data parallel on one device trains one process without a word: say so rather than run something else
        check(not (str(self.strategy or "") == "ddp" and self.devices in (1, "1", [0]) and (self.num_nodes or 1) == 1),
              f"trainer.strategy=ddp with trainer.devices={self.devices} is one process: give trainer.devices=2 or more "
              f"(trainer=ddp_sim: 2 CPU processes), or drop trainer=ddp for one device")
        check(not str(self.strategy or "").startswith("ddp_spawn"),
              f"trainer.strategy={self.strategy} trains in child processes that keep the run's record to themselves; use "
              f"trainer=ddp (the same data-parallel training) on GPUs, or trainer=ddp_sim (2 CPU processes)")
