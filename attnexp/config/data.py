"""What every data set's config has, and how data sets are registered (as variants are): a
dataclass that subclasses `DataConfig`, decorated with `@register`, whose `datamodule()` imports
its DataModule. The registry holds the configs only, so validating a config imports no Lightning.

A new data set is one module (its config and its DataModule) and one `conf/data/<name>.yaml`
(`defaults: [/data_<name>_schema@_here_, _self_]`); `tests/unit/data/test_adding_a_data_set.py`
shows it."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from attnexp.config.checks import check, from_dict
from attnexp.config.model import MAX_LEN

# The label of a position no loss is taken on (torch's cross_entropy ignore_index): written by the
# data's collators, skipped by the model's loss and the training step's token counts
IGNORE = -100

if TYPE_CHECKING:
    from attnexp.config.training import TaskConfig


@dataclass
class DataConfig:
    """The fields every data set has (a subclass sets its own defaults by declaring them again)."""

    name: str = ""
    seed: int = 0  # the data's draws and its train/val split
    max_len: int = 64  # tokens per example, the markers included; longer ones are truncated
    batch_size: int = 64
    num_workers: int = 0
    bucket: bool = False  # batch examples of similar length together
    pad_to_multiple_of: int | None = None  # batch lengths rounded up (null: 128 with FlexAttention, else none)

    def datamodule(self) -> type:
        """The DataModule that reads this config (imported here, so the config imports no Lightning)."""
        raise NotImplementedError(f"{type(self).__name__} names no DataModule: give it a datamodule() method")

    def aligned(self, task: TaskConfig) -> bool:
        """Whether its examples say which key each target query should attend to (alignment scores)."""
        return False

    def validate(self, task: TaskConfig) -> None:
        """Its own checks, after the shared ones (`check_shared`)."""

    def check_shared(self) -> None:
        check(self.batch_size > 0, f"data.batch_size={self.batch_size} must be positive")
        check(self.max_len >= 3, f"data.max_len={self.max_len} leaves no room for a token between the start and end "
                                 f"markers; use at least 3")
        check(self.max_len <= MAX_LEN, f"data.max_len={self.max_len} is beyond attnexp's limit of {MAX_LEN:,} tokens")
        check(self.num_workers >= 0, f"data.num_workers={self.num_workers} must be >= 0")
        check(self.pad_to_multiple_of is None or self.pad_to_multiple_of >= 1,
              f"data.pad_to_multiple_of={self.pad_to_multiple_of} must be >= 1 (or null)")


DATA_SETS: dict[str, type[DataConfig]] = {}  # data.name -> its config class


def register(cls: type[DataConfig]) -> type[DataConfig]:
    """Class decorator: a data set, selected by its `name` field's default (data.name / data=NAME)."""
    name = next(f.default for f in fields(cls) if f.name == "name")
    if not issubclass(cls, DataConfig) or not name:
        raise ValueError(f"{cls.__name__}: a data set's config subclasses DataConfig and gives `name` a default")
    old = DATA_SETS.get(name, cls)
    if (old.__module__, old.__qualname__) != (cls.__module__, cls.__qualname__):  # the same class imported again is one
        raise ValueError(f"data set {name!r} is registered twice: {DATA_SETS[name].__module__} and {cls.__module__}")
    DATA_SETS[name] = cls
    return cls


def load(raw: dict[str, Any], task: TaskConfig) -> DataConfig:
    """The data config `raw` names (data.name picks its class): checks shared by all data sets, then its own."""
    name = raw.get("name")
    check(name in DATA_SETS, f"data.name={name!r} is not one of: {', '.join(DATA_SETS)}")
    cfg = from_dict(DATA_SETS[name], raw, "data")
    cfg.check_shared()
    cfg.validate(task)
    return cfg
