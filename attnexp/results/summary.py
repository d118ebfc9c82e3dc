"""summary.json: one small record per run that sweeps and `attnexp compare` read. This module owns
it: its layout (`SCHEMA` bumps on any change; README.md lists the keys), the statuses, the part
known before training (settings, sizes, versions), the record of a run that stopped before its
first step, the one writer (atomic, strict JSON: NaN and infinities become null, so any JSON
parser reads it) and the one reader (`read`), which checks a record from a stranger's folder
before anything uses it. What a running Trainer adds (metrics, steps, time) comes from
attnexp.training.recorder.RunRecorder, through `write`.

No torch or Lightning import here: the CLI writes config-error records before either is loaded.
"""

from __future__ import annotations

import errno
import json
import math
import os
import socket
import sys
from dataclasses import asdict
from enum import StrEnum
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnexp.config import layout
from attnexp.config.paths import write_whole

if TYPE_CHECKING:
    from attnexp.config import JobContext, Run

SCHEMA = 6  # 2 added `overrides`; 3: statuses running/diverged/pruned, signal, resumed_from, pid/host, sweep, strict JSON;
# 4: perf (tokens/s, TFLOP/s, MFU of the last epoch), startup_s, early_stopping; 5: data.identity; 6: tags
NAME = layout.SUMMARY


class Status(StrEnum):
    """How a run stands. A str: written into JSON as its value, equal to it when read back."""

    RUNNING = "running"  # training, or killed outright (its process is gone: `compare` says killed)
    COMPLETED = "completed"
    INTERRUPTED = "interrupted"  # a stop signal: a checkpoint of that step, resumable
    DIVERGED = "diverged"  # a loss that is no longer a number; no checkpoint of it
    PRUNED = "pruned"  # an Optuna trial the pruner stopped
    FAILED = "failed"  # an exception
    CONFIG_ERROR = "config_error"  # bad settings or bad input data, found before the first step


# What `compare` and the report show for a run recorded `running` whose process is gone (same host):
# never written into a summary (a killed process writes nothing), so not a Status.
KILLED = "killed"

STATUSES = tuple(s.value for s in Status)
FAILURES = (Status.FAILED, Status.DIVERGED, Status.CONFIG_ERROR)  # what makes a sweep exit non-zero


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


RESERVE = 64 << 10  # bytes a running record keeps aside: its final status still fits on a full disk


def write(path: Path | str, data: Any, reserve: int = 0) -> None:
    """Strict JSON to a temporary file, then a rename: a reader (or a kill) never sees half a file.
    `reserve`: while a run is running, `reserve` bytes are kept aside in layout.RESERVE_FILE beside the
    record; on a full disk that file is given up and the record written again (or, if it is longer,
    its status and error alone): a full disk once left a run's record saying `running` for good. A
    record written with no reserve (the run's last) gives the file up. summary.json itself is plain
    JSON of its own size."""
    path = Path(path)
    spare = path.parent / layout.RESERVE_FILE
    text = dumps(data, indent=2) + "\n"
    try:
        keep_aside(spare, reserve)
        write_whole(path, text)
    except OSError as e:
        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        spare.unlink(missing_ok=True)  # the bytes kept aside: room for the record now
        short = {k: data.get(k) for k in ("schema", "status", "error", "run_dir")} if isinstance(data, dict) else {}
        short["note"] = "the whole record did not fit: the disk was full"
        try:
            write_whole(path, text)
        except OSError:
            write_whole(path, dumps(short) + "\n")
    if not reserve:
        spare.unlink(missing_ok=True)


def keep_aside(spare: Path, size: int) -> None:
    """`size` bytes of real blocks in `spare` (written, not a sparse file), made once; nothing for 0."""
    if size and not (spare.is_file() and not spare.is_symlink() and spare.stat().st_size >= size):
        write_whole(spare, bytes(size))


def _version(pkg: str) -> str | None:
    try:
        return version(pkg)
    except PackageNotFoundError:
        return None


def header(status: Status, error: str | None, run_dir: Path | str) -> dict:
    """The keys every record starts with."""
    return {"schema": SCHEMA, "status": Status(status).value, "error": error, "run_dir": str(run_dir)}


def static_record(run: Run, n_params: int, data: dict, dashboards: list[str] = ()) -> dict:
    """What the run is, known before the first step: `data` holds the DataModule's sizes, `dashboards`
    the commands that open its loggers' pages (training.loggers.dashboards)."""
    return {
        "choices": run.job.choices,
        "overrides": run.job.overrides,
        "sweep": run.job.sweep_dir,
        "attention": {"name": run.attention.name, "mask": run.attention.mask, "backend": run.attention.backend},
        "model": {**{k: v for k, v in asdict(run.model).items() if k in ("d_model", "n_heads", "n_layers", "max_len")},
                  "n_params": n_params},
        "data": data,
        "task": task_record(run.task),
        "seed": run.seed,
        "tags": list(run.tags),
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "dashboards": list(dashboards),
    }


def task_record(t) -> dict:
    """What the task was: the settings that applied to it (a classifier has no LM objective)."""
    if t.name == "classify":
        return {"name": t.name, "pooling": t.pooling}
    return {"name": t.name, "objective": t.objective, **({"mask_prob": t.mask_prob} if t.objective == "masked" else {})}


def versions() -> dict:
    return {"python": sys.version.split()[0], "torch": _version("torch"), "lightning": _version("lightning")}


def error_record(run_dir: Path | str, status: Status, error: str, job: JobContext, **extra) -> dict:
    """A run that stopped before its first step (a config error, a data error, a failed setup)."""
    return {**header(status, error, run_dir), "choices": job.choices, "overrides": job.overrides,
            "sweep": job.sweep_dir, **extra, "versions": versions()}


class SummaryError(ValueError):
    """A summary.json that cannot be used as one, with the reason in a few words."""


MAX_BYTES = 32 << 20  # a record of thousands of epochs is well under 1 MB; a 2 GB one cost compare 4.2 GB and 49 s


# key -> the JSON types it may hold (None: null); nested sections are checked below
_TYPES = {"status": (str,), "error": (str, type(None)), "run_dir": (str,), "overrides": (list, type(None)),
          "choices": (dict, type(None)), "metrics": (dict,), "attention": (dict,), "model": (dict,), "data": (dict,),
          "task": (dict,), "steps": (int,), "epochs": (int,), "train_time_s": (int, float, type(None)),
          "wall_time_s": (int, float, type(None)), "tokens_per_s": (int, float, type(None)), "sweep": (str, type(None)),
          "peak_memory": (dict, type(None)), "attention_maps": (dict, type(None)), "pid": (int, type(None)),
          "host": (str, type(None)), "seed": (int, type(None)), "perf": (dict, type(None))}
_METRICS = {"final": (dict,), "test": (dict,), "best": (dict, type(None)), "history": (list,)}
_MORE = {"tags": (list,), "dashboards": (list,), "versions": (dict,), "checkpoints": (dict, type(None)),
         "task": (dict,), "train_tokens": (int, type(None)), "device": (str, type(None)), "precision": (str, type(None)),
         "startup_s": (int, float, type(None)), "kind": (str,), "schema": (int,)}


def _number(v) -> bool:
    """A number attnexp could have written: finite, not a bool, within any size a run reaches."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and abs(v) < 1e18


def _numbers(d, what: str) -> None:
    if d is not None and not all(isinstance(k, str) and (v is None or _number(v)) for k, v in d.items()):
        raise SummaryError(f"{what} holds something other than numbers")


def _strings(d, what: str) -> None:
    """A list of texts, or an object whose values are texts or null."""
    ok = (all(isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in d.items()) if isinstance(d, dict)
          else all(isinstance(v, str) for v in d) if d is not None else True)
    if not ok:
        raise SummaryError(f"{what} holds something other than text")


def check_record(s: Any) -> dict:
    """The record, if it has summary.json's shape, every field a reader uses of its type; else
    SummaryError naming the first thing wrong."""
    if not isinstance(s, dict):
        raise SummaryError(f"a JSON {type(s).__name__}, not an object")
    for key, types in {**_TYPES, **_MORE}.items():
        if key in s and not isinstance(s[key], types) or (key in s and isinstance(s[key], bool) and bool not in types):
            raise SummaryError(f"{key!r} is a {type(s[key]).__name__}")
    if s.get("status") not in STATUSES:
        raise SummaryError(f"status {str(s.get('status'))[:40]!r} is not one of {', '.join(STATUSES)}")
    for key in ("steps", "epochs", "train_time_s", "wall_time_s", "tokens_per_s", "train_tokens", "startup_s", "seed"):
        if s.get(key) is not None and not _number(s[key]):
            raise SummaryError(f"{key} is not a number attnexp writes")
    for key in ("overrides", "tags", "dashboards"):
        _strings(s.get(key), key)
    for key in ("choices", "attention", "versions", "checkpoints"):
        _strings(s.get(key), key)
    for key in ("model", "peak_memory", "perf"):
        _numbers(s.get(key), key)
    check_metrics(s.get("metrics") or {})
    check_sections(s)
    return s


def check_metrics(m: dict) -> None:
    for key, types in _METRICS.items():
        if key in m and not isinstance(m[key], types):
            raise SummaryError(f"metrics.{key} is a {type(m[key]).__name__}")
    history = m.get("history") or []
    if not all(isinstance(h, dict) for h in history):
        raise SummaryError("metrics.history holds something other than objects")
    for h in history:
        _numbers(h, "metrics.history")
    for section in ("final", "test"):
        _numbers(m.get(section), f"metrics.{section}")
    best = m.get("best")
    if best is not None and not (_number(best.get("value")) and isinstance(best.get("monitor"), str)
                                 and isinstance(best.get("checkpoint"), (str, type(None)))):
        raise SummaryError("metrics.best has no numeric value and monitor name")


def check_sections(s: dict) -> None:
    """The nested sections the readers open: data's name and sizes, the task's settings, the maps' record."""
    data = s.get("data") or {}
    if not isinstance(data.get("name"), (str, type(None))) or not all(
            _number(v) or v is None for k, v in data.items() if k.startswith("n_") or k in ("vocab_size", "num_classes")):
        raise SummaryError("data holds a name or a size of the wrong type")
    if not all(v is None or isinstance(v, (str, int, float, bool)) for v in (s.get("task") or {}).values()):
        raise SummaryError("task holds something other than settings")
    maps = s.get("attention_maps") or {}
    al, t = maps.get("alignment"), maps.get("timeline")
    if not isinstance(maps.get("dir"), (str, type(None))) or (al is not None and not (
            isinstance(al, dict) and all(_number(al.get(k)) for k in ("layer", "head", "best")))):
        raise SummaryError("attention_maps holds a folder or an alignment of the wrong type")
    if t is not None and not (isinstance(t, dict) and isinstance(t.get("formations", []), list)
                              and isinstance(t.get("file", ""), str) and _number(t.get("readings", 0))):
        raise SummaryError("attention_maps.timeline is not a timeline's record")
    _strings(maps.get("written"), "attention_maps.written")


def read(path: Path | str) -> dict:
    """One run's record, checked (`check_record`); SummaryError if it is missing, not UTF-8 JSON,
    or not shaped like a summary."""
    from attnexp.config.files import FileRefused, read_json

    try:
        data = read_json(path, MAX_BYTES)
    except FileRefused as e:
        raise SummaryError(str(e)) from None
    return check_record(data)


def read_status(run_dir: Path | str) -> Status | None:
    """The status a run folder's summary.json records, or None when there is no usable one."""
    try:
        return Status(read(Path(run_dir) / NAME)["status"])
    except SummaryError:
        return None


def objective(record: dict, monitor: str | None = None) -> float | None:
    """What a sweep optimizes for a run: its best monitored value; for a run that keeps no
    checkpoint (trainer.fast_dev_run), the monitored value of its one validation. None: nothing to tell."""
    metrics = record.get("metrics") or {}
    best = (metrics.get("best") or {}).get("value")
    if best is not None:
        return float(best)
    final = (metrics.get("final") or {}).get(monitor) if monitor else None
    return float(final) if isinstance(final, (int, float)) and not isinstance(final, bool) else None
