"""summary.json: one small record per run that sweeps and `attnexp compare` read. This module owns
its layout (`SCHEMA` bumps on any change; README.md lists the keys), the part known before
training (settings, sizes, versions), the record of a config error, and the atomic write.
What a running Trainer adds (metrics, steps, time) comes from attnexp.recorder.RunRecorder.

No torch or Lightning import here: the CLI writes config-error records before either is loaded.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from attnexp.run import Run

SCHEMA = 2  # 2 added `overrides`


def write_json(path: Path, data: dict) -> None:
    """Write to a temporary file, then rename: a reader never sees half a file."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    os.replace(tmp, path)


def _version(pkg: str) -> str | None:
    try:
        return version(pkg)
    except PackageNotFoundError:
        return None


def head(status: str, error: str | None, run_dir: Path | str) -> dict:
    return {"schema": SCHEMA, "status": status, "error": error, "run_dir": str(run_dir)}


def static_record(run: "Run", n_params: int, data: dict) -> dict:
    """What the run is, known before the first step: `data` holds the DataModule's sizes."""
    return {
        "choices": run.choices,
        "overrides": run.overrides,
        "attention": {"name": run.attention.name, "mask": run.attention.mask, "backend": run.attention.backend},
        "model": {**{k: v for k, v in asdict(run.model).items() if k in ("d_model", "n_heads", "n_layers", "max_len")},
                  "n_params": n_params},
        "data": data,
        "task": asdict(run.task),
        "seed": run.seed,
    }


def versions() -> dict:
    return {"python": sys.version.split()[0], "torch": _version("torch"), "lightning": _version("lightning")}


def config_error_record(run_dir: Path | str, error: str, choices: dict, overrides: list[str] | None) -> dict:
    return {**head("config_error", error, run_dir), "choices": choices, "overrides": overrides}
