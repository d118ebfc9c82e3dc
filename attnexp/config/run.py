"""`Run`: everything one training run needs, validated (attnexp.launch builds it from Hydra's
config), and `JobContext`: what the launcher knows about the job, passed down as data instead of
environment variables or module globals."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnexp.config.data import DataConfig
from attnexp.config.model import AttentionConfig, ModelConfig
from attnexp.config.training import CheckpointConfig, MapsConfig, OptimConfig, TaskConfig, TrainerConfig


@dataclass(frozen=True)
class TrialRef:
    """The Optuna trial a sweep job runs for: where its study lives and the trial's number. The job
    opens the study itself (the trial object does not cross into the job), so pruning works
    whether the job runs in the sweeper's process or in another."""

    storage: str
    study_name: str
    number: int
    pruner: str = "median"  # median | none: the sweeper's, rebuilt in the job (a study's pruner is not stored)
    n_startup_trials: int = 3
    n_warmup_steps: int = 1


@dataclass
class JobContext:
    choices: dict[str, str | None] = field(default_factory=dict)  # the option picked in each config group
    overrides: list[str] | None = None  # the command line's overrides, as Hydra received them
    sweep_dir: str | None = None  # the multirun's folder when this run is one job of a sweep
    swept: list[str] = field(default_factory=list)  # the keys the sweep varies (folder names, wandb group/tags)
    cpus: int | None = None  # CPUs the launcher gives this job (a cluster's cpus_per_task, a parallel job's share)
    trial: TrialRef | None = None
    started: float | None = None  # time.time() when the command started: summary.json's startup_s


@dataclass
class ExtrasConfig:
    """lightning-hydra-template's `extras`: what a run does around its training."""

    print_config: bool = False  # the composed config as YAML on the console as the run starts (config_resolved.yaml always)
    ignore_warnings: bool = True  # drop Lightning's warnings and adverts that do not apply (training/build.py lists them)
    enforce_tags: bool = False  # refuse a run without tags=[...] (lightning-hydra-template's: sweeps you can find again)


@dataclass
class Run:
    attention: AttentionConfig  # the variant's defaults filled in
    model: ModelConfig
    task: TaskConfig  # `auto` choices already resolved
    optim: OptimConfig
    data: DataConfig
    trainer: TrainerConfig
    seed: int
    resume: str | None  # a checkpoint path, "auto" (this run folder's newest, if any) or None
    test: bool
    maps: MapsConfig
    checkpoint: CheckpointConfig  # mode resolved from the metric when `auto`
    loggers: dict[str, dict]  # hydra.utils.instantiate specs of third-party objects
    callbacks: dict[str, dict]
    out_dir: Path  # where the run writes (Hydra's job dir in the CLI)
    config: dict[str, Any]  # the whole config, resolved: config_resolved.yaml, the loggers' hyperparameters
    threads: int | None = None  # CPU intra-op threads (None: the job's CPUs, else torch's default)
    tags: list[str] = field(default_factory=list)  # the run's labels (summary.json, loggers, compare)
    extras: ExtrasConfig = field(default_factory=ExtrasConfig)
    job: JobContext = field(default_factory=JobContext)
