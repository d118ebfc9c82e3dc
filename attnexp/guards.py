"""Callbacks that stop a run cleanly: a stop signal waits for the validation pass in progress
(a checkpoint taken mid-validation would not resume cleanly), and a loss that is no longer a
number stops the run before any checkpoint of the broken weights is written."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import torch

from attnexp.stops import Diverged, Pruned, StopSignals


class SignalGate(L.Callback):
    """Turns a stop signal that arrived during a validation pass (or the sanity check) into
    Lightning's stop request once the pass is over; see StopSignals."""

    def __init__(self, stops: StopSignals):
        self.stops = stops

    def _release(self, trainer):
        if self.stops.pending:
            self.stops.pending = False
            trainer._signal_connector.received_sigterm = True

    def on_validation_end(self, trainer, pl_module):
        if not trainer.sanity_checking:
            self._release(trainer)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if not trainer.fit_loop.epoch_loop.batch_progress.is_last_batch:  # else: after the epoch's validation
            self._release(trainer)

    def on_train_epoch_end(self, trainer, pl_module):  # an epoch without validation
        self._release(trainer)


class DivergenceGuard(L.Callback):
    """Stops the run (status diverged) when the training loss is not finite. The check accumulates
    on the device and is read on the host every `every` steps (1 on the CPU, where a read costs
    nothing; the logging interval on a GPU), before every validation and before every checkpoint
    is written, so no checkpoint holds weights trained through a NaN."""

    def __init__(self, ckpt_dir: Path, every: int):
        self.ckpt_dir, self.every = Path(ckpt_dir), max(1, every)
        self.first_bad: torch.Tensor | None = None  # step of the first non-finite loss, -1 while none

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if loss is None:  # a batch skipped by optim.nonfinite=skip
            return
        if self.first_bad is None:
            self.first_bad = torch.full((), -1, dtype=torch.long, device=loss.device)
        bad = ~torch.isfinite(loss.detach())
        self.first_bad = torch.where(bad & (self.first_bad < 0), torch.full_like(self.first_bad, trainer.global_step),
                                     self.first_bad)
        if trainer.global_step % self.every == 0:
            self.check()

    def on_validation_start(self, trainer, pl_module):
        if not trainer.sanity_checking:
            self.check()

    def on_save_checkpoint(self, trainer, pl_module, checkpoint):
        self.check()

    def on_train_end(self, trainer, pl_module):
        self.check()

    def check(self) -> None:
        step = -1 if self.first_bad is None else int(self.first_bad)
        if step >= 0:
            raise Diverged(f"the training loss stopped being a number at step {step}; stopped there "
                           f"(optim.nonfinite=stop). {last_good(self.ckpt_dir)}")


def last_good(ckpt_dir: Path) -> str:
    found = sorted(Path(ckpt_dir).glob("*.ckpt"), key=lambda p: p.stat().st_mtime)
    return f"Last good checkpoint: {found[-1]}" if found else "No checkpoint was written before it."


class OptunaPruning(L.Callback):
    """Reports `monitor` to an Optuna trial after every validation and stops the run when the
    study's pruner says this trial is worse than the others were at the same epoch."""

    def __init__(self, trial, monitor: str):
        self.trial, self.monitor = trial, monitor

    def on_validation_end(self, trainer, pl_module):
        value = trainer.callback_metrics.get(self.monitor)
        if trainer.sanity_checking or value is None:
            return
        self.trial.report(float(value), step=trainer.current_epoch)
        if self.trial.should_prune():
            raise Pruned(f"pruned by Optuna after epoch {trainer.current_epoch} ({self.monitor} {float(value):.4g})")
