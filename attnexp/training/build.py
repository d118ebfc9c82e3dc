"""What a run trains with, built from a `Run`: the threads it may use, the checkpoint it resumes
from, its callbacks (ours, then the config's), its loggers and Lightning's Trainer. Third-party
objects are built with Hydra's `instantiate`; everything of ours from typed configs."""

from __future__ import annotations

import logging
import os
import shutil
import time
import warnings
from pathlib import Path

import torch
from hydra.utils import instantiate
from lightning.fabric.plugins import TorchCheckpointIO
from lightning.pytorch.callbacks import EarlyStopping, LearningRateMonitor, ModelCheckpoint

from attnexp.compat.lightning import on_last_batch, saved_at_step
from attnexp.config import ConfigError, Run
from attnexp.config.paths import whole
from attnexp.model import checkpoints
from attnexp.results.compare import alive
from attnexp.training.console import EpochLines, bar_safe_logging, interactive
from attnexp.training.device import precision, training_on_cpu
from attnexp.training.guards import OptunaPruning, StopGuard
from attnexp.training.loggers import log_config, run_fields, sweep_fields
from attnexp.training.maps_callback import AttentionMaps

log = logging.getLogger(__name__)

class _DropAdverts(logging.Filter):
    """Lightning's lines that say nothing about an attnexp run: its adverts, the accelerators that are
    absent (the end block names the device used), and how it counts the batches of the schedule."""

    NOISE = ("litlogger", "GPU available: False", "TPU available: False", "HPU available: False",
             "Loading `train_dataloader` to estimate number of stepping batches")

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(n in message for n in self.NOISE)


def quiet_lightning(ignore_warnings: bool = True) -> None:
    """Lightning's console for attnexp's runs: its warnings and adverts that do not apply dropped
    (unless extras.ignore_warnings=false), its log lines printed once and around the progress bar."""
    if ignore_warnings:
        _drop_warnings()
    bar_safe_logging()
    # Under Hydra the root logger already prints (and writes the job's .log): Lightning's own
    # console handlers would print every line twice.
    if logging.getLogger().handlers:
        for name in ("lightning", "lightning.pytorch", "lightning.fabric"):
            lg = logging.getLogger(name)
            for h in list(lg.handlers):
                lg.removeHandler(h)
            lg.propagate = True


def _drop_warnings() -> None:
    # num_workers=0 is a deliberate default for in-memory token lists; the hint is noise here.
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")
    warnings.filterwarnings("ignore", message=".*isinstance.treespec, LeafSpec.*")
    # Our batch sampler resumes mid-epoch from Lightning's own progress counters (data/base.py),
    # which Lightning cannot see: its warning that the loader is not resumable does not apply.
    warnings.filterwarnings("ignore", message=".*dataloader is not resumable.*")
    warnings.filterwarnings("ignore", message=".*`training_step` returned `None`.*")  # optim.nonfinite=skip, on purpose
    # DDP: our epoch values are reduced already (torchmetrics' compute, the loss sums in the module)
    warnings.filterwarnings("ignore", message=".*when logging on epoch level in distributed setting.*")
    warnings.filterwarnings("ignore", message=".*Checkpoint directory .* exists and is not empty.*")  # a resumed run's own
    # on any machine with SLURM's tools installed, whether or not this process runs under SLURM
    warnings.filterwarnings("ignore", message=".*The `srun` command is available on your system but is not used.*")
    # a short run (debug presets, tests) has fewer batches than trainer.log_every_n_steps: its epoch values are logged anyway
    warnings.filterwarnings("ignore", message=".*is smaller than the logging interval.*")
    rank_zero = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    if not any(isinstance(f, _DropAdverts) for f in rank_zero.filters):  # once, however many jobs a sweep runs
        rank_zero.addFilter(_DropAdverts())


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
    for folder in (run_dir, run_dir / "checkpoints"):
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


def thread_count(run: Run, since: CoreSample | None = None) -> int | None:
    """`given_threads`, else `free_threads` (from `since`), else None: torch's default."""
    return given_threads(run) or free_threads(since)


def given_threads(run: Run) -> int | None:
    """`threads=N`; else the CPUs the launcher gives the job (a cluster's cpus_per_task, or the share
    of this machine's cores the command line gave each job run side by side)."""
    return run.threads or run.job.cpus


def free_threads(since: CoreSample | None = None) -> int | None:
    """The cores other processes leave free when the run starts (over the window from `since`), where
    that is fewer than all of them, else None (torch's default, a thread a core, spins OpenMP threads
    against a busy core: a short run on 2 cores with one busy trained 3.9x slower than free, 1.8x
    with one thread: scripts/bench/threads_busy.py)."""
    free, allowed = free_cores(since=since), _allowed_cores()
    if free is None or allowed is None or free >= allowed:
        return None
    log.info("threads: %d, the cores of %d that other processes left free when the run started (threads=N to choose)",
             free, allowed)
    return free


def _allowed_cores() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def _cpu_times() -> tuple[int, int, int]:
    """The machine's idle and total CPU time so far, and this process's own, in clock ticks
    (/proc/stat's first line; /proc/self/stat's utime + stime)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]  # user nice system idle iowait irq softirq steal
    with open("/proc/self/stat") as f:
        own = f.read().rsplit(")", 1)[1].split()  # after the command name: state is field 3, utime 14, stime 15
    return v[3] + v[4], sum(v), int(own[11]) + int(own[12])


class CoreSample:
    """The CPU times at a moment: the start of the window `free_cores` reads, taken early so the
    window overlaps the run's own start-up (data set-up) instead of adding a wait to it."""

    def __init__(self):
        self.at = time.monotonic()
        try:
            self.times: tuple[int, int, int] | None = _cpu_times()
        except (OSError, ValueError, IndexError):
            self.times = None


def free_cores(window_s: float = 0.1, since: CoreSample | None = None) -> int | None:
    """How many of this process's cores other processes leave idle: the machine's idle share over a
    window of at least `window_s` from `since` (waiting only for what is left of it), with this
    process's own CPU time in it counted as idle, times the cores; rounded, at least 1 and at most
    the cores it may use; None where /proc cannot be read."""
    since = since or CoreSample()
    time.sleep(max(0.0, window_s - (time.monotonic() - since.at)))
    try:
        i1, t1, o1 = _cpu_times()
    except (OSError, ValueError, IndexError):
        return None
    allowed = _allowed_cores()
    if since.times is None or t1 <= since.times[1] or not allowed:
        return None
    i0, t0, o0 = since.times
    idle = (i1 - i0 + o1 - o0) / (t1 - t0) * (os.cpu_count() or allowed)
    return max(1, min(allowed, int(idle + 0.5)))


def resume_path(run: Run) -> Path | None:
    """resume=auto: the newest checkpoint of this run's own folder (none yet: a fresh start, which
    makes `resume=auto` safe on every launch of a preemptible job); resume=PATH: that file."""
    if run.resume == "auto":
        return checkpoints.newest(run.out_dir)
    return Path(run.resume) if run.resume else None


def our_callbacks(run: Run, recorder, stops) -> tuple[list, ModelCheckpoint, AttentionMaps | None]:
    """The checkpoints (best by checkpoint.monitor, last, every N steps), the recorder, the stop
    and divergence guard, early stopping, the epoch lines (where no bar is drawn), Optuna's pruning
    and the attention maps: (callbacks, the best-checkpoint callback, the maps callback)."""
    ckpt_dir = run.out_dir / "checkpoints"
    best = BestAndLast(dirpath=ckpt_dir, filename="best-epoch{epoch:02d}", monitor=run.checkpoint.monitor,
                       mode=run.checkpoint.mode, save_top_k=1, auto_insert_metric_name=False)
    guard = StopGuard(stops, ckpt_dir if run.optim.nonfinite == "stop" else None, every=run.trainer.log_every_n_steps or 50)
    out = [best, recorder, guard]
    if run.checkpoint.every_n_steps:  # the latest only
        out.append(StepCheckpoint(dirpath=ckpt_dir, filename="step-{step:07d}", every_n_train_steps=run.checkpoint.every_n_steps,
                                  save_top_k=1, auto_insert_metric_name=False, save_last=True, enable_version_counter=False))
    if run.checkpoint.patience:
        out.append(EarlyStopping(monitor=run.checkpoint.monitor, mode=run.checkpoint.mode, patience=run.checkpoint.patience))
    if not shows_bar(run):
        out.append(EpochLines())
    if run.job.trial is not None:
        out.append(OptunaPruning(run.job.trial, run.checkpoint.monitor))
    maps = AttentionMaps(run.maps, run.out_dir) if run.maps.enabled else None
    return out + ([maps] if maps else []), best, maps


def shows_bar(run: Run) -> bool:
    """A progress bar only where someone watches it (a terminal), unless turned off."""
    return run.trainer.enable_progress_bar is not False and interactive()


def loggers(run: Run) -> list:
    """The configured loggers, a sweep's fields added, each holding the whole config (TensorBoard's
    hparams.yaml, wandb's run config)."""
    built = [instantiate(run_fields(sweep_fields(spec, run.job.sweep_dir, run.job.swept, run.job.overrides), run.tags,
                                    run.out_dir.name)) for spec in run.loggers.values()]
    log_config(built, run.config)
    return built


def trainer(run: Run, callbacks: list, loggers_: list):
    """Lightning's Trainer from trainer.* (the precision resolved), our checkpoint IO, the callbacks
    and loggers. A setting Lightning refuses is a ConfigError with Lightning's whole sentence."""
    if loggers_:
        callbacks = [*callbacks, LearningRateMonitor(logging_interval="step")]
    # use_distributed_sampler=False whatever the strategy: attnexp's batch sampler shards itself
    # across processes (and resumes mid-epoch), and Lightning cannot put its sampler into it, so
    # trainer.devices=2 with the default trainer runs as trainer=ddp does.
    settings = {"use_distributed_sampler": False, **run.trainer.kwargs()}
    try:
        return instantiate({**settings, "precision": precision(run.trainer), "enable_progress_bar": shows_bar(run)},
                           callbacks=callbacks, logger=loggers_ or False, default_root_dir=str(run.out_dir),
                           plugins=[AtomicCheckpointIO()], _convert_="partial")
    except Exception as e:  # noqa: BLE001 - Hydra wraps Lightning's MisconfigurationException
        cause = e.__cause__ or e
        raise ConfigError(f"trainer: {' '.join(str(cause).split())}") from None


def on_cpu(run: Run) -> bool:
    return training_on_cpu(run.trainer) or not torch.cuda.is_available()
