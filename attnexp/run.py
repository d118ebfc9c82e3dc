"""The composed DictConfig, validated once into typed objects (no Lightning import here, so a
typo in an override is reported in about a second)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from attnexp import attention, checkpoints
from attnexp.config import (AttentionConfig, CheckpointConfig, MapsConfig, ModelConfig, OptimConfig, TaskConfig,
                            TrainerConfig, check, from_dict, monitored_metrics, resolve_checkpoint, resolve_task,
                            validate_maps, validate_model, validate_optim, validate_task, validate_trainer)
from attnexp.data.configs import DataConfig, load_data_config


@dataclass
class Run:
    """Everything one training run needs, validated."""

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
    choices: dict[str, str | None]  # the option picked in each config group
    overrides: list[str] | None  # the command line's overrides, as Hydra received them
    sweep_dir: str | None  # the multirun's folder when this run is one job of a sweep
    config: dict[str, Any]  # the whole config, resolved: config_resolved.yaml, the loggers' hyperparameters
    threads: int | None = None  # CPU intra-op threads (None: automatic, see train.thread_count)


@dataclass
class TopLevel:  # conf/config.yaml's own keys
    seed: int
    resume: str | None
    test: bool
    threads: int | None


def section(cfg: DictConfig, key: str) -> dict:
    """cfg[key] as a plain, resolved dict ({} when absent)."""
    node = cfg.get(key)
    return {} if node is None else OmegaConf.to_container(node, resolve=True)


def training_on_cpu(trainer: TrainerConfig) -> bool:
    acc = str(trainer.accelerator or "auto")
    return acc == "cpu" or (acc == "auto" and not torch.cuda.is_available())


def hydra_context() -> tuple[dict, list[str] | None, str | None]:
    """(choices, overrides, sweep dir) of the Hydra job being run or composed; empty outside Hydra."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized():
        return {}, None, None
    hc = HydraConfig.get()
    choices = {k: v for k, v in hc.runtime.choices.items() if not k.startswith("hydra")}
    sweep = str(Path(hc.sweep.dir).resolve()) if hc.mode == RunMode.MULTIRUN else None
    return choices, list(hc.overrides.task), sweep


def load_run(cfg: DictConfig) -> Run:
    """The one place a DictConfig turns into typed objects; every mistake is a ConfigError."""
    m = from_dict(ModelConfig, section(cfg, "model"), "model")
    t = from_dict(TaskConfig, section(cfg, "task"), "task")
    o = from_dict(OptimConfig, section(cfg, "optim"), "optim")
    trainer = TrainerConfig.from_raw(section(cfg, "trainer"))
    validate_trainer(trainer)
    check(str(trainer.accelerator) not in ("gpu", "cuda") or torch.cuda.is_available(),
          f"trainer.accelerator={trainer.accelerator} but no CUDA GPU is visible here; use trainer.accelerator=auto "
          f"(a GPU when there is one) or trainer=cpu")
    data = load_data_config(section(cfg, "data"), t)  # before the model: model.max_len follows data.max_len
    a = from_dict(AttentionConfig, section(cfg, "attention"), "attention")
    if m.init:  # pretrained: sizes, norm, attention layout and tokenizer are the checkpoint's
        from attnexp import hf

        validate_model(m)
        source = hf.source_of(m.init)
        m, a = hf.configs(source, m, a)
        check(hasattr(data, "tokenizer"), f"model.init={m.init} needs text tokenized with the checkpoint's tokenizer: "
                                          f"data=newsgroups (e.g. experiment=newsgroups_bert), not data={data.name}")
        if data.tokenizer is None:
            data = replace(data, tokenizer=hf.tokenizer_of(source), lowercase=False)  # its own normalizer lowercases
    validate_model(m)
    a = attention.validate(a, m, training_on_cpu=training_on_cpu(trainer))
    if data.pad_to_multiple_of is None and a.backend == "flex":
        # FlexAttention compiles once per sequence length: rounded batch lengths keep that to a few shapes
        data = replace(data, pad_to_multiple_of=128)
    validate_task(t, a)
    validate_optim(o)
    check(data.max_len <= m.max_len,
          f"data.max_len={data.max_len} is longer than model.max_len={m.max_len}; raise model.max_len or lower data.max_len")
    resume = cfg.get("resume")
    if resume not in (None, "auto"):
        ckpt = checkpoints.load(resume, "resume")
        problem = checkpoints.mismatch(ckpt, asdict(m), asdict(a), asdict(t), "resume", resume)
        check(problem is None, problem or "")
    maps = from_dict(MapsConfig, section(cfg, "maps"), "maps")
    validate_maps(maps)
    ckpt = from_dict(CheckpointConfig, section(cfg, "checkpoint"), "checkpoint")
    ckpt = resolve_checkpoint(ckpt, monitored_metrics(t, data.aligned(t), maps.enabled))
    choices, overrides, sweep = hydra_context()
    resolved = {k: section(cfg, k) if OmegaConf.is_config(cfg[k]) else cfg[k] for k in cfg if k != "hydra"}
    top = from_dict(TopLevel, {k: cfg.get(k) for k in ("seed", "resume", "test", "threads")}, "")
    check(top.threads is None or top.threads >= 1, f"threads={top.threads} must be >= 1 (or null: automatic)")
    return Run(a, m, resolve_task(t, a), o, data, trainer, top.seed, resume, top.test,
               maps, ckpt, loggers=section(cfg, "logger"), callbacks=section(cfg, "callbacks"),
               out_dir=Path(cfg.paths.output_dir), choices=choices, overrides=overrides, sweep_dir=sweep,
               config=resolved, threads=top.threads)
