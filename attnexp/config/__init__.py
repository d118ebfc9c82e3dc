"""Typed configuration: Hydra composes a DictConfig, attnexp.launch validates it once into these
dataclasses, and everything below the command line works with plain objects. No torch, no Hydra.

Errors are `ConfigError`s whose message names the key, the bad value and the fix; the command
line prints them as one line."""

from attnexp.config.checks import ConfigError, check, from_dict, one_of
from attnexp.config.hub import hub_offline
from attnexp.config.metrics import ALIGN_BEST, higher_is_better, monitored_metrics, stage_metrics
from attnexp.config.model import LIMITS, MAX_LEN, AttentionConfig, ModelConfig
from attnexp.config.overrides import split_override
from attnexp.config.run import ExtrasConfig, JobContext, Run, TrialRef
from attnexp.config.training import CheckpointConfig, MapsConfig, OptimConfig, TaskConfig, TrainerConfig

__all__ = ["ConfigError", "check", "from_dict", "one_of", "hub_offline", "ALIGN_BEST", "higher_is_better",
           "monitored_metrics", "stage_metrics", "LIMITS", "MAX_LEN", "AttentionConfig", "ModelConfig", "split_override",
           "ExtrasConfig", "JobContext", "Run", "TrialRef",
           "CheckpointConfig", "MapsConfig", "OptimConfig", "TaskConfig", "TrainerConfig"]
