"""DataModules. Each owns its tokenization and exposes `vocab_size`, `num_classes`, `pad_id` and
`decode`, which the model and the map logger read instead of hard-coding them."""

from __future__ import annotations

from attnexp.config import TaskConfig
from attnexp.config.data import DataConfig


def build_datamodule(cfg: DataConfig, task: TaskConfig, causal: bool, run_dir: str | None = None, seed: int = 0):
    """`cfg` is a validated data config (attnexp.config.data); its `datamodule()` is the DataModule.
    `seed` (the run's) orders the training batches of every epoch."""
    return cfg.datamodule()(cfg, task, causal=causal, run_dir=run_dir, seed=seed)
