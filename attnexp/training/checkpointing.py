"""How a run's checkpoints are written and chosen: whole-or-nothing saves (AtomicCheckpointIO), the
orphans a killed save leaves (remove_orphans), the best and last checkpoints (BestAndLast) and a
checkpoint every N steps (StepCheckpoint)."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import torch
from lightning.fabric.plugins import TorchCheckpointIO
from lightning.pytorch.callbacks import ModelCheckpoint

from attnexp.compat.lightning import on_last_batch, saved_at_step
from attnexp.config import ConfigError, layout
from attnexp.config.paths import whole
from attnexp.results.compare import alive

log = logging.getLogger("attnexp")


class AtomicCheckpointIO(TorchCheckpointIO):
    """torch.save into a file beside the target, flushed to disk, then renamed over it: a kill
    during a save leaves the previous checkpoint whole. (Lightning's own save goes through an fsspec
    transaction whose temporary file lives in the system temp dir; across filesystems its final
    move is a copy, which a kill can leave half-written.)

    Where the filesystem allows (Linux: ext4, xfs, btrfs, tmpfs) the file has no name until it is
    whole (O_TMPFILE, then linked in): a SIGKILL or a full disk mid-save leaves nothing behind.
    Elsewhere it is `.<name>.<pid>.tmp`, removed on an error and, after a kill, by the next run in
    that folder (`remove_orphans`)."""

    def save_checkpoint(self, checkpoint, path, storage_options=None):
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with whole(path) as tmp:
            if not _save_unnamed(checkpoint, tmp):
                with open(tmp, "wb") as f:
                    _write(checkpoint, f)


def _write(checkpoint, f) -> None:
    torch.save(checkpoint, f)
    f.flush()
    os.fsync(f.fileno())


def _save_unnamed(checkpoint, name: Path) -> bool:
    """The checkpoint written to a file with no name (O_TMPFILE) and linked in as `name` once
    whole; False where the OS or filesystem cannot (nothing was written then)."""
    if not hasattr(os, "O_TMPFILE") or not Path("/proc/self/fd").is_dir():
        return False
    try:
        fd = os.open(name.parent, os.O_TMPFILE | os.O_WRONLY, 0o644)
    except OSError:
        return False
    folder = os.open(name.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with os.fdopen(fd, "wb") as f:
            _write(checkpoint, f)
            name.unlink(missing_ok=True)
            # linkat(AT_SYMLINK_FOLLOW) on /proc/self/fd/N, as open(2) describes; a dir fd makes
            # Python call linkat rather than link, which would not follow the magic link
            os.link(f"/proc/self/fd/{f.fileno()}", name.name, dst_dir_fd=folder, follow_symlinks=True)
    finally:
        os.close(folder)
    return True


def remove_orphans(run_dir: Path) -> None:
    """Temporary files (`.<name>.<pid>.tmp`) that a killed process left in a run folder (its
    checkpoints where O_TMPFILE is missing, summary.json): removed when the next run starts there."""
    for folder in (run_dir, run_dir / layout.CHECKPOINTS):
        for p in folder.glob(".*.tmp") if folder.is_dir() else ():
            pid = p.name.rsplit(".", 2)[-2]
            if pid.isdigit() and not alive(int(pid)):
                p.unlink(missing_ok=True)


class BestAndLast(ModelCheckpoint):
    """The best checkpoint by `checkpoint.monitor`, and `last.ckpt` holding the newest state after
    every validation (and at the end of training), whatever the monitor says. Lightning's own
    `save_last=True` rewrites last.ckpt only on a step where a top-k checkpoint was saved, so a run
    whose monitor stopped improving kept an old last.ckpt, and resume=auto retrained the epochs since.

    A run resumed into another folder (resume=PATH from a new run) keeps the best score and file:
    Lightning forgets both there (its "dirpath has changed" warning), and the next epoch became
    "best" whatever its score."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, save_last=True, enable_version_counter=False, **kwargs)

    def on_validation_end(self, trainer, pl_module):
        super().on_validation_end(trainer, pl_module)
        if not self._should_save_on_train_epoch_end(trainer):
            self._refresh_last(trainer)

    def on_train_epoch_end(self, trainer, pl_module):
        super().on_train_epoch_end(trainer, pl_module)
        if self._should_save_on_train_epoch_end(trainer):
            self._refresh_last(trainer)

    def on_train_end(self, trainer, pl_module):
        self._refresh_last(trainer)  # e.g. a last epoch with no validation (check_val_every_n_epoch > 1)

    def _save_last_checkpoint(self, trainer, monitor_candidates) -> None:
        """last.ckpt as a hard link to the best checkpoint just written at this step (one write and
        one fsync an improving epoch, not two: at GPT-2 small's size each is ~1.5 GB), else saved.
        A later save replaces last.ckpt by rename, so the best file is never touched; a filesystem
        without hard links gets a copy."""
        best = saved_at_step(self, trainer)  # the same on every rank: all take the same branch
        last = Path(self.format_checkpoint_name(monitor_candidates, self.CHECKPOINT_NAME_LAST))
        if not best or Path(best) == last:
            return super()._save_last_checkpoint(trainer, monitor_candidates)
        if trainer.is_global_zero:
            with whole(last) as tmp:
                try:
                    os.link(best, tmp)
                except OSError:  # no hard links here: a copy, still no second torch.save
                    shutil.copyfile(best, tmp)
        self.last_model_path = str(last)
        trainer.strategy.barrier()

    def _refresh_last(self, trainer) -> None:
        # skips a step already saved (by the top-k save, which writes last.ckpt too), the sanity
        # check, fast_dev_run and everything outside fit
        if not self._should_skip_saving_checkpoint(trainer):
            self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))

    def load_state_dict(self, state_dict: dict) -> None:
        theirs = state_dict.get("dirpath")
        if not theirs or self.dirpath is None or Path(theirs) == Path(self.dirpath):
            return super().load_state_dict(state_dict)
        moved = {p: self._carried(p) for p in state_dict.get("best_k_models", {})}
        self.best_model_score = state_dict["best_model_score"]
        self.best_k_models = {moved[p]: v for p, v in state_dict.get("best_k_models", {}).items() if moved[p]}
        self.best_model_path = moved.get(state_dict.get("best_model_path")) or ""
        self.kth_best_model_path = moved.get(state_dict.get("kth_best_model_path")) or ""
        self.kth_value = state_dict.get("kth_value", self.kth_value)

    def _carried(self, path: str) -> str | None:
        """The resumed run's best file, copied into this run's folder (a hard link where the
        filesystem allows), so this run's test and later best saves never touch the other folder."""
        src = Path(path)
        if not src.is_file():
            return None
        dst = Path(self.dirpath) / src.name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if not dst.exists():
            try:
                os.link(src, dst)
            except OSError:
                shutil.copyfile(src, dst)
        return str(dst)


class StepCheckpoint(ModelCheckpoint):
    """checkpoint.every_n_steps, but never on an epoch's last batch. That checkpoint would be taken
    before the epoch's validation (Lightning runs it after the batch's hooks), and a run resumed
    from it skips that validation, its history, maps and chance at "best", and a later resume
    replays an epoch. The epoch-end checkpoints (last.ckpt) come after validation, so every
    checkpoint on disk resumes into the uninterrupted run."""

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if not on_last_batch(trainer):
            super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)

    def load_state_dict(self, state_dict: dict) -> None:
        # resumed into another folder: the other run's latest step file stays that run's (and
        # Lightning's "dirpath has changed" warning would say nothing the user can act on)
        if Path(state_dict.get("dirpath") or "") == Path(self.dirpath or ""):
            super().load_state_dict(state_dict)


def check_state(state) -> None:
    """The maps callback's state in a checkpoint, typed before it is used: the epochs it drew (ints), its
    best alignment (numbers or null) and its last timeline step (an int or null): anything else is one
    line, never a traceback, and a forged history never reaches the new run's record."""
    def count(x) -> bool:
        return isinstance(x, int) and not isinstance(x, bool) and -1 <= x < 10**9

    al = state.get("last_alignment") if isinstance(state, dict) else None
    ok = (isinstance(state, dict) and isinstance(state.get("epochs"), list) and len(state["epochs"]) <= 100_000
          and all(count(e) for e in state["epochs"]) and (state.get("timeline_step") is None or count(state["timeline_step"]))
          and (al is None or isinstance(al, dict) and all(count(al.get(k)) for k in ("layer", "head"))
               and isinstance(al.get("best"), (int, float)) and not isinstance(al.get("best"), bool)))
    if not ok:
        raise ConfigError("the checkpoint's attention-maps state is not what attnexp writes (epochs, alignment, "
                          "timeline step); resume from a checkpoint a run saved, or start the run again")
