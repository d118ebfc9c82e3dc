"""The composed DictConfig, validated once into typed objects (no Lightning import here, so a
typo in an override is reported in about a second)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from attnexp import attention
from attnexp.config import (AttentionConfig, CheckpointConfig, MapsConfig, ModelConfig, OptimConfig, TaskConfig, check,
                            from_dict, monitored_metrics, resolve_checkpoint, resolve_task, validate_maps, validate_model,
                            validate_optim, validate_task)
from attnexp.data.configs import load_data_config

SCHEMA = 2  # summary.json's layout (README.md lists the keys); 2 added `overrides`


@dataclass
class Run:
    attention: AttentionConfig
    model: ModelConfig
    task: TaskConfig  # `auto` choices already resolved
    optim: OptimConfig
    data: object  # one of attnexp.data.configs' dataclasses
    trainer: dict
    seed: int
    resume: str | None
    test: bool
    maps: MapsConfig
    checkpoint: CheckpointConfig  # mode resolved from the metric when `auto`


def section(cfg: DictConfig, key: str) -> dict:
    """cfg[key] as a plain, resolved dict ({} when absent)."""
    node = cfg.get(key)
    return {} if node is None else OmegaConf.to_container(node, resolve=True)


def training_on_cpu(trainer: dict) -> bool:
    acc = str(trainer.get("accelerator", "auto"))
    return acc == "cpu" or (acc == "auto" and not torch.cuda.is_available())


def load_run(cfg: DictConfig) -> Run:
    """The one place a DictConfig turns into typed objects; every mistake is a ConfigError."""
    a = from_dict(AttentionConfig, section(cfg, "attention"), "attention")
    m = from_dict(ModelConfig, section(cfg, "model"), "model")
    t = from_dict(TaskConfig, section(cfg, "task"), "task")
    o = from_dict(OptimConfig, section(cfg, "optim"), "optim")
    trainer = section(cfg, "trainer")
    validate_model(m)
    attention.validate(a, m, training_on_cpu=training_on_cpu(trainer))
    validate_task(t, a)
    validate_optim(o)
    data = load_data_config(section(cfg, "data"), t)
    check(data.max_len <= m.max_len,
          f"data.max_len={data.max_len} is longer than model.max_len={m.max_len}; raise model.max_len or lower data.max_len")
    resume = cfg.get("resume")
    check(resume is None or Path(resume).is_file(), f"resume={resume!r}: no such checkpoint file")
    maps = from_dict(MapsConfig, section(cfg, "maps"), "maps")
    validate_maps(maps)
    ckpt = from_dict(CheckpointConfig, section(cfg, "checkpoint"), "checkpoint")
    ckpt = resolve_checkpoint(ckpt, monitored_metrics(t, data.name, maps.enabled))
    return Run(a, m, resolve_task(t, a), o, data, trainer, int(cfg.get("seed", 0)), resume, bool(cfg.get("test", True)),
               maps, ckpt)


def write_json(path: Path, data: dict) -> None:
    """Write to a temporary file, then rename: a reader never sees half a file."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    os.replace(tmp, path)
