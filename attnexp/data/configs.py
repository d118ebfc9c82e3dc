"""The data sets' typed configs, kept apart from the DataModules so that validating a config
(and Hydra's schemas) does not import Lightning."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from attnexp.config import TaskConfig, check, from_dict


@dataclass
class ToyDataConfig:
    name: str = "toy"
    corpus: str | None = None  # a UTF-8 text file, one sentence per line; null = built-in grammar
    n_sentences: int = 6000  # built-in grammar only
    seed: int = 0  # corpus generation and the train/val split
    min_freq: int = 1
    lowercase: bool = True
    max_len: int = 64
    batch_size: int = 64
    val_fraction: float = 0.1
    num_workers: int = 0  # the toy data is tiny: worker start-up would cost more than it saves
    bucket: bool = False

    def validate(self, task: TaskConfig) -> None:
        check(0 < self.val_fraction < 1, f"data.val_fraction={self.val_fraction} must be in (0, 1)")
        if self.corpus is not None:
            check(Path(self.corpus).is_file(), f"data.corpus={self.corpus!r}: no such file; give a path to a UTF-8 text "
                                               f"file (one sentence per line), or data.corpus=null for the built-in corpus")
            check(task.name != "classify", "task=classify on a text file needs labels; use the built-in corpus "
                                           "(data.corpus=null, label = subject number) or data=newsgroups")


SCHEMAS = {"toy": ToyDataConfig}


def load_data_config(raw: dict, task: TaskConfig):
    """The data config's `name` picks its dataclass; checks shared by all data sets, then its own."""
    name = raw.get("name")
    check(name in SCHEMAS, f"data.name={name!r} is not one of: {', '.join(SCHEMAS)}")
    cfg = from_dict(SCHEMAS[name], raw, "data")
    for k in ("batch_size", "max_len"):
        check(getattr(cfg, k) > 0, f"data.{k}={getattr(cfg, k)} must be positive")
    check(cfg.num_workers >= 0, f"data.num_workers={cfg.num_workers} must be >= 0")
    cfg.validate(task)
    return cfg
