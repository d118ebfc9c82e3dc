"""Where attnexp reaches into Lightning's private parts: each use is a function here, and
tests/unit/test_lightning_private.py fails loudly when the installed Lightning changes
what it relies on."""

from __future__ import annotations

import subprocess
import threading


def release_ddp_children(timeout: float = 60) -> None:
    """After one job of a sweep that trained with DDP: Lightning's launcher started the other ranks
    as child processes and a watcher thread that, when any child exits non-zero, SIGKILLs the children
    and the main process (`_ChildProcessObserver._terminate_all`). A failed job's children exit
    non-zero, so the watcher killed the whole sweep (no summary.json, no error line, the other jobs
    never ran). The watcher is given no children to watch, and the children are waited for (killed
    after `timeout` seconds), so the next job starts clean."""
    from lightning.fabric.strategies.launchers.subprocess_script import _ChildProcessObserver

    for t in threading.enumerate():
        if isinstance(t, _ChildProcessObserver):
            procs, t._child_processes = t._child_processes, []
            for p in procs:
                try:
                    p.wait(timeout)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def clip_unscaled_fused(trainer, optimizer, clip_val: float, algorithm: str | None) -> bool:
    """Clip a fused optimizer's gradients where no GradScaler scales them (bf16-mixed); False
    where Lightning's own clipping should run. Lightning's MixedPrecision plugin refuses to clip
    for any optimizer that unscales internally (torch's `_step_supports_amp_scaling`: fused AdamW),
    under bf16 too, where nothing is scaled (Lightning #21435, open): every GPU run with the default
    trainer.gradient_clip_val=1.0 stopped at its first step. The gradients are plain ones then, so
    they are clipped as the base Precision plugin clips them."""
    from lightning.pytorch.plugins.precision import MixedPrecision, Precision
    from lightning.pytorch.utilities import GradClipAlgorithmType

    plugin = trainer.precision_plugin
    if not (clip_val and isinstance(plugin, MixedPrecision) and plugin.scaler is None
            and getattr(optimizer, "_step_supports_amp_scaling", False)):
        return False
    Precision.clip_gradients(plugin, optimizer, clip_val, GradClipAlgorithmType(algorithm or "norm"))
    return True


def scales_gradients(trainer) -> bool:
    """Whether the precision plugin scales the loss (16-mixed's GradScaler): a fused optimizer then
    unscales inside its step, so Lightning cannot clip its gradients before it."""
    return getattr(trainer.precision_plugin, "scaler", None) is not None


def request_stop(trainer, stop: bool = True) -> None:
    """Ask the fit loop to stop after the current step as on SIGTERM (stop=True; Lightning then raises
    SIGTERMException), or take back Lightning's own such request (stop=False)."""
    trainer._signal_connector.received_sigterm = stop


def on_last_batch(trainer) -> bool:
    """Whether the training batch just run is the epoch's last (its validation comes next)."""
    return trainer.fit_loop.epoch_loop.batch_progress.is_last_batch


def steps_logged(trainer) -> int:
    """The step Lightning writes metrics at (one less than global_step at the end of an epoch)."""
    return trainer.fit_loop.epoch_loop._batches_that_stepped


def fit_position(trainer) -> tuple[int, int]:
    """(epochs done, batches of the current epoch already trained on): the second is nonzero only in a
    run resumed mid-epoch, where Lightning restores its progress and expects the rest of the epoch."""
    return trainer.fit_loop.epoch_progress.current.processed, trainer.fit_loop.epoch_loop.batch_progress.current.ready


def wandb_started(logger) -> bool:
    """Whether a WandbLogger has started its run (reading `.experiment` would start one)."""
    return logger._experiment is not None


def saved_at_step(callback, trainer) -> str | None:
    """The file a ModelCheckpoint wrote at this very step (its top-k save), or None."""
    path = callback._last_checkpoint_saved
    return path if path and callback._last_global_step_saved == trainer.global_step else None
