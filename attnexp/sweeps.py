"""What a sweep adds to a run: which settings it sweeps (the folder names, the wandb group and
tags say only those), the Optuna trial a job belongs to (for pruning from per-epoch values), and
a fair share of CPU threads when jobs run side by side on one machine."""

from __future__ import annotations

import os
from pathlib import Path

SWEPT_ENV = "ATTNEXP_SWEPT"  # comma list of the keys a multirun sweeps, set by the CLI for its jobs
ACTIVE_TRIALS: dict[int, object] = {}  # Hydra job number -> optuna.Trial, set by the Optuna sweeper (in-process jobs)


def split_override(override: str) -> tuple[str, str]:
    """`+model.init=hf:x` -> ("model.init", "hf:x"): the key without Hydra's +/~/++ prefix, and the value."""
    key, _, value = override.lstrip("+~").partition("=")
    return key, value


def is_sweep(override: str) -> bool:
    """`key=a,b`, `key=range(..)`, `key=choice(..)`, `key=interval(..)`, `key=glob(..)`."""
    key, _, value = override.partition("=")
    return not key.startswith("hydra") and ("," in value and not value.lstrip().startswith("[") or
                                            value.lstrip().startswith(("range(", "choice(", "interval(", "glob(", "tag(")))


def swept_keys(overrides: list[str]) -> list[str]:
    return [split_override(o)[0] for o in overrides if is_sweep(o)]


def sweep_dirname_overrides(overrides: list[str]) -> list[str]:
    """Hydra names a job's folder after all its overrides (~170 characters with a few fixed
    ones); keep only the swept keys in it: `3_attention=alibi,seed=1`."""
    keys = {split_override(o)[0] for o in overrides if "=" in o and not o.startswith("hydra")}
    fixed = sorted(keys - set(swept_keys(overrides)))
    return [f"hydra.job.config.override_dirname.exclude_keys=[{','.join(fixed)}]"] if fixed else []


def swept() -> list[str]:
    return [k for k in os.environ.get(SWEPT_ENV, "").split(",") if k]


def wandb_sweep_fields(spec: dict, sweep_dir: str | None, overrides: list[str] | None) -> dict:
    """A sweep's runs share a wandb group (the sweep folder) and carry the swept settings as
    job_type and tags, so wandb's grouping and filters follow the sweep."""
    if not sweep_dir:
        return spec
    keys = swept()
    values = [o.lstrip("+~") for o in overrides or [] if split_override(o)[0] in keys]
    root = Path(sweep_dir)
    return {**spec, "group": f"{root.parent.name}/{root.name}", "job_type": ",".join(keys) or "sweep",
            "tags": [*(spec.get("tags") or []), *values]}


def threads(n_parallel: int | None) -> int:
    """Intra-op threads for one of `n_parallel` jobs sharing this machine: each gets its share of
    the cores, not all of them (two jobs each running on every core ran ~9x slower than alone)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // max(1, n_parallel or 1))
