"""How configuration mistakes are said: a `ConfigError` whose message names the key, the bad
value and the fix (the command line prints it as one line), and the type check that turns a plain
dict into one of our dataclasses."""

from __future__ import annotations

import os
from dataclasses import fields
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A configuration mistake the user can fix by changing an override."""


def check(cond: bool, msg: str) -> None:
    if not cond:
        raise ConfigError(msg)


def one_of(value: str, options, key: str) -> None:
    check(value in options, f"{key}={value!r} is not one of: {', '.join(options)}")


_KINDS = {  # the type names used in our dataclasses' annotations -> (accepts, what the message asks for)
    "int": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "float": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "str": (lambda v: isinstance(v, str), "a string"),
    "None": (lambda v: v is None, "null"),
    "list": (lambda v: isinstance(v, (list, tuple)), "a list"),
    "dict": (lambda v: isinstance(v, dict), "a mapping"),
    "Any": (lambda v: True, "anything"),
}


def _check_type(annotation: str, value, key: str):
    """`value` against an annotation such as "int | None" or "list[float]"; ints widen to float."""
    kinds = [t.strip().split("[")[0] for t in annotation.split("|")]
    if not any(_KINDS[k][0](value) for k in kinds):
        want = " or ".join(_KINDS[k][1] for k in kinds)
        raise ConfigError(f"{key}={value!r} must be {want}")
    if "float" in kinds and "int" not in kinds and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def from_dict(cls, raw: Any, where: str):
    """Build dataclass `cls` from a plain dict; unknown keys and wrong types are ConfigErrors."""
    check(isinstance(raw, dict), f"{where or 'the config'} must be a mapping of keys to values, not {type(raw).__name__}")
    names = {f.name: f for f in fields(cls)}
    unknown = sorted(set(raw) - set(names))
    check(not unknown, f"{where}: unknown key(s) {', '.join(map(str, unknown))}; valid keys: {', '.join(names)}")
    values = {k: _check_type(names[k].type if isinstance(names[k].type, str) else names[k].type.__name__, v,
                             f"{where}.{k}" if where else k) for k, v in raw.items()}
    return cls(**values)


def unwritable(folder: Path, key: str, what: str = "the run folder", fix: str | None = None) -> str | None:
    """One line when `folder` cannot be made or written (a file in its way, a read-only disk, no
    permission), said before any work and before a mkdir fails with a traceback; else None. `key`: the
    setting that names it; `fix`: what the line tells the user to give (default KEY=DIR)."""
    fix = fix or f"{key}=DIR"
    existing = Path(folder).absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"cannot write {what} {folder}: {existing} is a file, not a folder; give a folder with {fix}"
    if os.access(existing, os.W_OK | os.X_OK):
        return full(existing, folder, what)
    try:
        read_only = bool(os.statvfs(existing).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    why = "is on a read-only file system" if read_only else "is not writable by this user"
    return f"cannot write {what} {folder}: {existing} {why}; give a writable folder with {fix}"


MIN_FREE_BYTES = 64 << 10  # Hydra's .hydra/ files (~10 kB), the lock and the first record: under this the disk is full


def full(existing: Path, folder: Path, what: str) -> str | None:
    """One line when the disk that would hold `folder` is already full, said before Hydra writes
    .hydra/config.yaml there (which would fail in a traceback and leave no record), else None."""
    import shutil

    try:
        free = shutil.disk_usage(existing).free
    except OSError:
        return None
    if free >= MIN_FREE_BYTES:
        return None
    return f"disk full: cannot write {what} {folder}: {free:,} bytes free there; free some space or give another folder"

