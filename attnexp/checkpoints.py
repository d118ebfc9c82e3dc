"""Checkpoints handed to attnexp (resume=, `attnexp maps ckpt=`): loaded as data only
(`torch.load(weights_only=True)`: tensors, numbers, strings and containers, never code), and
checked before any training starts, with one line saying what is wrong."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import torch

from attnexp.config import ConfigError

NAMES = ("interrupted.ckpt", "last.ckpt", "step-*.ckpt")  # what `resume=auto` considers, newest step first
MODEL_KEYS = ("d_model", "n_heads", "n_layers", "d_ff", "max_len", "pos_emb", "tie_embeddings")


def load(path: str | Path, key: str = "ckpt") -> dict:
    """The checkpoint as a dict of plain data, memory-mapped (sizes and settings are read without
    reading every tensor). Anything else is a ConfigError naming `key=path`."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{key}={str(path)!r}: no such checkpoint file (runs keep them in <run>/checkpoints/)")
    try:
        try:
            ckpt = torch.load(p, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError as e:
            if "mmap" not in str(e):
                raise
            ckpt = torch.load(p, map_location="cpu", weights_only=True)  # a legacy (non-zip) file
    except Exception as e:  # the weights-only unpickler raises anything at all on a file that is not a pickle
        what = re.search(r"(?:unsupported|Unsupported global:) GLOBAL ([\w.]+)", str(e)) if isinstance(e, pickle.UnpicklingError) else None
        if what:
            raise ConfigError(f"{key}={str(path)!r} was refused: it asks to call {what.group(1)}, which a checkpoint "
                              f"has no business doing; attnexp loads checkpoints as data only") from None
        if isinstance(e, pickle.UnpicklingError) and re.search(r"\bGLOBAL\b|Unsupported global", str(e)):
            raise ConfigError(f"{key}={str(path)!r} was refused: it asks to build objects a checkpoint has no "
                              f"business holding; attnexp loads checkpoints as data only") from None
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
        raise ConfigError(f"{key}={str(path)!r} is not a readable checkpoint (truncated, or not a file torch.save "
                          f"wrote): {first}") from None
    if not isinstance(ckpt, dict) or not {"state_dict", "hyper_parameters"} <= set(ckpt):
        raise ConfigError(f"{key}={str(path)!r} is a torch file but not an attnexp checkpoint (no state_dict and "
                          f"hyper_parameters); give a .ckpt from a run's checkpoints/ folder")
    return ckpt


def mismatch(ckpt: dict, model: dict, attention: dict, task: dict, key: str, path: str | Path) -> str | None:
    """None when the checkpoint's model is the one these settings build; else one line naming what differs."""
    hp = ckpt["hyper_parameters"]
    diff = [(f"model.{k}", hp.get("model", {}).get(k), model.get(k)) for k in MODEL_KEYS]
    diff += [(f"attention.{k}", hp.get("attention", {}).get(k), v) for k, v in attention.items()
             if k in ("name", "window", "n_kv_heads") or (k == "mask")]
    diff += [("task.name", hp.get("task", {}).get("name"), task.get("name"))]
    diff = [(k, was, now) for k, was, now in diff if was != now]
    if not diff:
        return None
    said = ", ".join(f"{k}={was} (this run: {now})" for k, was, now in diff)
    return f"{key}={str(path)!r} holds a different model: {said}; use the settings it was trained with"


def check_shapes(ckpt: dict, state_dict: dict, key: str, path: str | Path) -> None:
    """Every tensor of the checkpoint fits the model built for this run (vocabulary and class
    counts come from the data, so this is checked once the data is set up)."""
    theirs = ckpt["state_dict"]
    missing = sorted(set(state_dict) - set(theirs))
    if missing:
        raise ConfigError(f"{key}={str(path)!r} lacks {len(missing)} of this model's tensors (e.g. {missing[0]}); "
                          f"it was trained with other settings")
    for name, t in state_dict.items():
        if tuple(theirs[name].shape) != tuple(t.shape):
            raise ConfigError(f"{key}={str(path)!r}: {name} has shape {tuple(theirs[name].shape)}, this model "
                              f"{tuple(t.shape)} (different data: vocabulary or classes); use the data it was trained on")


def newest(run_dir: str | Path) -> Path | None:
    """The checkpoint a resumed run continues from: the one with the most optimizer steps among
    interrupted.ckpt, last.ckpt and step-*.ckpt in <run_dir>/checkpoints (the newest file on a tie)."""
    folder = Path(run_dir) / "checkpoints"
    found = [p for pattern in NAMES for p in folder.glob(pattern)]
    scored = []
    for p in found:
        try:
            scored.append((int(load(p, "resume").get("global_step", 0)), p.stat().st_mtime, p))
        except ConfigError:
            continue  # a file cut short by a kill: the previous one is the one to use
    return max(scored)[2] if scored else None
