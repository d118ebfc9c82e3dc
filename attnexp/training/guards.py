"""Callbacks that stop a run cleanly: a stop signal waits for the validation pass in progress
(a checkpoint taken mid-validation would not resume cleanly), and a loss that is no longer a
number stops the run before any checkpoint of the broken weights is written."""

from __future__ import annotations

import math
from pathlib import Path

import lightning as L
import torch

from attnexp.compat.lightning import on_last_batch, request_stop
from attnexp.compat.optuna import trial_of
from attnexp.config import TrialRef
from attnexp.config.study import StudyStorage
from attnexp.training.stops import Diverged, Pruned, StopSignals


class StopGuard(L.Callback):
    """Stops a run cleanly, for two reasons (one callback: Lightning calls every callback on every
    hook of every step, ~15 us each on a CPU, whether it overrides the hook or not).

    A stop signal that arrived during a validation pass (or the sanity check) becomes Lightning's
    stop request once the pass is over; see StopSignals.

    With `ckpt_dir` (optim.nonfinite=stop), a training loss that is not finite stops the run (status
    diverged). The check stays on the device, the same on every device: the step of the first bad
    loss is kept in a device tensor (a few tiny ops a step, no read), and the module's logged
    `train/loss` is NaN from that step on. Where the loss is logged, Lightning's own conversion of it
    is the one read: the guard looks at the logged number on the next step. Where nothing shows the
    loss (no logger, no progress bar), the guard reads the flag itself every `every` steps (the
    logging interval). Before every validation, every checkpoint and the end of training it reads
    the flag, so no checkpoint holds weights trained through a NaN, and the step it names is exact."""

    def __init__(self, stops: StopSignals, ckpt_dir: Path | None = None, every: int = 1):
        self.stops, self.every = stops, max(1, every)
        self.ckpt_dir = Path(ckpt_dir) if ckpt_dir is not None else None
        self.first_bad: torch.Tensor | int | None = None  # step of the first non-finite loss (-1 or None while none)

    # -- stop signals -----------------------------------------------------------------------------
    def _release(self, trainer):
        if self.stops.pending:
            self.stops.pending = False
            request_stop(trainer)

    def on_validation_end(self, trainer, pl_module):
        if not trainer.sanity_checking:
            self._release(trainer)

    def on_train_epoch_end(self, trainer, pl_module):  # an epoch without validation
        self._release(trainer)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if not on_last_batch(trainer):  # else: after the epoch's validation
            self._release(trainer)
        if self.ckpt_dir is not None:
            self._watch(trainer, outputs)

    # -- non-finite losses ------------------------------------------------------------------------
    def _watch(self, trainer, outputs) -> None:
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if loss is None:  # a batch skipped by optim.nonfinite=skip
            return
        if self.first_bad is None:
            self.first_bad = torch.full((), -1, dtype=torch.long, device=loss.device)
            trainer.lightning_module.diverged_at = self.first_bad
        bad = ~torch.isfinite(loss.detach())
        self.first_bad.copy_(torch.where(bad & (self.first_bad < 0), trainer.global_step, self.first_bad))
        if trainer.global_step % self.every == 0 and not trainer.lightning_module.step_loss_shown:
            self.check()  # nothing reads the logged loss: this is the interval's one read

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        """The loss the module logged at the last logging step, already on the host: NaN once any loss
        was not finite (the module's logged_loss), and then the exact step is read."""
        logged, pl_module.host_step_loss = pl_module.host_step_loss, None
        if self.ckpt_dir is not None and logged is not None and not math.isfinite(float(logged)):
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
    """Reports `monitor` to the job's Optuna trial after every validation and stops the run when the
    study's pruner says this trial is worse than the others were at the same epoch. The trial is
    opened from the study's storage by number (`TrialRef`), in whichever process the job runs."""

    def __init__(self, ref: TrialRef, monitor: str):
        self.ref, self.monitor = ref, monitor
        self._trial = None

    def trial(self):
        if self._trial is None:
            import optuna

            r = self.ref
            pruner = (optuna.pruners.NopPruner() if r.pruner == "none" else
                      optuna.pruners.MedianPruner(n_startup_trials=r.n_startup_trials, n_warmup_steps=r.n_warmup_steps))
            study = optuna.load_study(study_name=r.study_name, storage=StudyStorage.parse(r.storage).optuna(), pruner=pruner)
            self._trial = trial_of(study, self.ref.number)
        return self._trial

    def on_validation_end(self, trainer, pl_module):
        value = trainer.callback_metrics.get(self.monitor)
        if trainer.sanity_checking or value is None:
            return
        trial = self.trial()
        trial.report(float(value), step=trainer.current_epoch)
        if trial.should_prune():
            raise Pruned(f"pruned by Optuna after epoch {trainer.current_epoch} ({self.monitor} {float(value):.4g})")
