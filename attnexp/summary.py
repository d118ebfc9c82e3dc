"""summary.json: one small record per run that sweeps and `attnexp compare` read. This module owns
its layout (`SCHEMA` bumps on any change; README.md lists the keys), the part known before
training (settings, sizes, versions), the record of a config error, and the write: atomic and
strict JSON (NaN and infinities become null, so any JSON parser reads it).
What a running Trainer adds (metrics, steps, time) comes from attnexp.recorder.RunRecorder.

No torch or Lightning import here: the CLI writes config-error records before either is loaded.
"""

from __future__ import annotations

import json
import math
import os
import socket
import sys
from dataclasses import asdict
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from attnexp.run import Run

SCHEMA = 4  # 2 added `overrides`; 3: statuses running/diverged/pruned, signal, resumed_from, pid/host, sweep, strict JSON;
# 4: perf (tokens/s, TFLOP/s, MFU of the last epoch), startup_s, early_stopping
STATUSES = ("running", "completed", "interrupted", "diverged", "pruned", "failed", "config_error")


def strict(obj: Any) -> Any:
    """The same data with every non-finite float replaced by None (JSON has no NaN or Infinity)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict(v) for v in obj]
    return obj


def dumps(data: Any, **kw) -> str:
    return json.dumps(strict(data), allow_nan=False, default=str, **kw)


def write_json(path: Path | str, data: Any) -> None:
    """Strict JSON to a temporary file, then a rename: a reader (or a kill) never sees half a file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


def _version(pkg: str) -> str | None:
    try:
        return version(pkg)
    except PackageNotFoundError:
        return None


def head(status: str, error: str | None, run_dir: Path | str) -> dict:
    assert status in STATUSES, status
    return {"schema": SCHEMA, "status": status, "error": error, "run_dir": str(run_dir)}


def static_record(run: "Run", n_params: int, data: dict) -> dict:
    """What the run is, known before the first step: `data` holds the DataModule's sizes."""
    return {
        "choices": run.choices,
        "overrides": run.overrides,
        "sweep": run.sweep_dir,
        "attention": {"name": run.attention.name, "mask": run.attention.mask, "backend": run.attention.backend},
        "model": {**{k: v for k, v in asdict(run.model).items() if k in ("d_model", "n_heads", "n_layers", "max_len")},
                  "n_params": n_params},
        "data": data,
        "task": asdict(run.task),
        "seed": run.seed,
        "pid": os.getpid(),
        "host": socket.gethostname(),
    }


def versions() -> dict:
    return {"python": sys.version.split()[0], "torch": _version("torch"), "lightning": _version("lightning")}


def error_record(run_dir: Path | str, status: str, error: str, choices: dict, overrides: list[str] | None,
                 sweep: str | None = None) -> dict:
    """A run that stopped before its first step (a config error, a data error, a failed setup)."""
    return {**head(status, error, run_dir), "choices": choices, "overrides": overrides, "sweep": sweep,
            "versions": versions()}
