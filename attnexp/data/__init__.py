"""DataModules. Each owns its tokenization and exposes `vocab_size`, `num_classes`, `pad_id` and
`decode`, which the model and the map logger read instead of hard-coding them."""

from __future__ import annotations

import importlib

from attnexp.config import TaskConfig


def build_datamodule(cfg, task: TaskConfig, causal: bool, run_dir: str | None = None, seed: int = 0):
    """`cfg` is a validated data config (attnexp.data.configs); its `module` names the DataModule.
    `seed` (the run's) orders the training batches of every epoch."""
    module, _, cls = type(cfg).module.partition(":")
    return getattr(importlib.import_module(module), cls)(cfg, task, causal=causal, run_dir=run_dir, seed=seed)
