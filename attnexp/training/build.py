"""What a run trains with, built from a `Run`: the checkpoint it resumes
from, its callbacks (ours, then the config's; checkpointing.py writes and chooses the checkpoints), its
loggers and Lightning's Trainer (threads.py: how many threads). Third-party
objects are built with Hydra's `instantiate`; everything of ours from typed configs."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

from hydra.utils import instantiate
from lightning.pytorch.callbacks import EarlyStopping, LearningRateMonitor, ModelCheckpoint

from attnexp.config import ConfigError, Run, layout
from attnexp.model import checkpoints
from attnexp.training.checkpointing import AtomicCheckpointIO, BestAndLast, StepCheckpoint
from attnexp.training.console import EpochLines, bar_safe_logging, interactive
from attnexp.training.device import precision
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
    ckpt_dir = run.out_dir / layout.CHECKPOINTS
    best = BestAndLast(dirpath=ckpt_dir, filename=layout.BEST, monitor=run.checkpoint.monitor,
                       mode=run.checkpoint.mode, save_top_k=1, auto_insert_metric_name=False)
    guard = StopGuard(stops, ckpt_dir if run.optim.nonfinite == "stop" else None, every=run.trainer.log_every_n_steps or 50)
    out = [best, recorder, guard]
    if run.checkpoint.every_n_steps:  # the latest only
        out.append(StepCheckpoint(dirpath=ckpt_dir, filename=layout.STEP, every_n_train_steps=run.checkpoint.every_n_steps,
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


