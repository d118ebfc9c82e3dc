"""DataModules. Each owns its tokenization and exposes `vocab_size`, `num_classes`, `pad_id` and
`decode`, which the model and the map logger read instead of hard-coding them."""

from __future__ import annotations

from attnexp.config import TaskConfig


def build_datamodule(cfg, task: TaskConfig, causal: bool, run_dir: str | None = None):
    """`cfg` is a validated data config (attnexp.data.configs); its `name` picks the module."""
    if cfg.name == "toy":
        from attnexp.data.toy import ToyDataModule as cls
    elif cfg.name == "newsgroups":
        from attnexp.data.newsgroups import NewsgroupsDataModule as cls
    elif cfg.name == "synthetic":
        from attnexp.data.synthetic import SyntheticDataModule as cls
    else:
        raise ValueError(f"no DataModule for data.name={cfg.name!r}")
    return cls(cfg, task, causal=causal, run_dir=run_dir)
