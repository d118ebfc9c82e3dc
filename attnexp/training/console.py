"""What the terminal shows while a run trains: a line per epoch where the output is not a terminal
(a log file, a cluster's stdout) instead of progress-bar redraws, and log lines that do not
collide with a live bar. (The block a run ends with is attnexp.results.ending's.)"""

from __future__ import annotations

import logging
import sys
import time

import lightning as L
from tqdm import tqdm

log = logging.getLogger("attnexp")


def interactive() -> bool:
    return sys.stdout.isatty()


class EpochLines(L.Callback):
    """For non-interactive output: a progress line every 30 s within an epoch (step of total, last logged loss,
    ms/step, ETA), and one line an epoch, e.g.
    `epoch 2 (3 of 8) · step 252 · train/acc 0.31 · train/loss_epoch 2.27 · val/acc 0.317 · val/loss 2.18 · 1.4 s`.
    Epochs are numbered from 0 everywhere, as Lightning, the checkpoints (best-epoch02.ckpt), the
    summary and the maps number them; "(3 of 8)" is the count. Written when the next epoch starts (or
    training ends): the module logs an epoch's training metrics after the callbacks' on_train_epoch_end."""

    EVERY_S = 30.0  # a progress line within an epoch this often (a slow machine's epoch can take minutes)
    shows_step_loss = True  # the module copies the loss to the host at logging steps for it (module.step_loss_shown)

    def __init__(self):
        self.t0, self.epoch = None, None
        self.last = None  # (time, step) of the last progress line

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        now = time.perf_counter()
        if self.last is None:
            self.last = (now, trainer.global_step)
            return
        if now - self.last[0] < self.EVERY_S or not trainer.is_global_zero:
            return
        t, step = self.last
        ms = 1000 * (now - t) / max(1, trainer.global_step - step)
        total = trainer.estimated_stepping_batches
        eta = f" · ETA {fmt(ms * (total - trainer.global_step) / 1000)}" if total and total != float("inf") else ""
        # the last logged loss, already on the host (module.last_logged_loss): the step's own loss is a device
        # tensor, and float() of it would wait for the GPU every 30 s
        loss = getattr(pl_module, "last_logged_loss", None)
        said = f" · loss {loss:.4g}" if loss is not None else ""
        log.info("step %d of %s%s · %.0f ms/step%s", trainer.global_step, total if total != float("inf") else "?", said, ms,
                 eta)
        self.last = (now, trainer.global_step)

    def _line(self, trainer):
        if self.epoch is None or not trainer.is_global_zero:
            return
        m = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith(("train/", "val/", "align/best"))}
        shown = " · ".join(f"{k} {v:.4g}" for k, v in sorted(m.items()) if k != "train/loss")
        total = trainer.max_epochs if trainer.max_epochs and trainer.max_epochs > 0 else "?"
        log.info("epoch %d (%d of %s) · step %d · %s · %.1f s", self.epoch, self.epoch + 1, total, trainer.global_step,
                 shown, time.perf_counter() - self.t0)
        self.epoch = None

    def on_train_epoch_start(self, trainer, pl_module):
        self._line(trainer)
        self.t0, self.epoch = time.perf_counter(), trainer.current_epoch

    def on_train_end(self, trainer, pl_module):
        self._line(trainer)

    # Scoring a split can take minutes (20 Newsgroups' 7,532 test posts on 2 CPU cores): a line as it
    # starts, one every EVERY_S, one as it ends.
    def on_test_epoch_start(self, trainer, pl_module):
        self._pass_start(trainer, "testing")

    def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        self._pass_step(trainer, "testing", batch_idx, trainer.num_test_batches[dataloader_idx])

    def on_test_epoch_end(self, trainer, pl_module):
        self._pass_end(trainer, "testing")

    def on_validation_epoch_start(self, trainer, pl_module):
        self._pass_start(trainer, None)

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        total = trainer.num_sanity_val_batches if trainer.sanity_checking else trainer.num_val_batches
        self._pass_step(trainer, "validating", batch_idx, total[dataloader_idx])

    def _pass_start(self, trainer, what: str | None) -> None:
        self.pass_t0 = self.pass_last = time.perf_counter()
        if what and trainer.is_global_zero:
            batches = sum(trainer.num_test_batches) if what == "testing" else "?"
            log.info("%s: %s batches", what, batches)

    def _pass_step(self, trainer, what: str, batch_idx: int, total) -> None:
        now = time.perf_counter()
        if now - getattr(self, "pass_last", now) < self.EVERY_S or not trainer.is_global_zero:
            return
        self.pass_last = now
        log.info("%s: batch %d of %s · %s so far", what, batch_idx + 1, total, fmt(now - self.pass_t0))

    def _pass_end(self, trainer, what: str) -> None:
        if trainer.is_global_zero:
            log.info("%s: done in %s", what, fmt(time.perf_counter() - self.pass_t0))


def fmt(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s" if m else f"{s}s"


class _BarSafe(logging.Handler):
    """Writes through tqdm.write, which lifts a live progress bar off the line first (a log line
    printed while a bar is drawn otherwise lands in the middle of it)."""

    def __init__(self, inner: logging.StreamHandler):
        super().__init__(inner.level)
        self.inner = inner
        self.setFormatter(inner.formatter)

    def emit(self, record):
        try:
            tqdm.write(self.format(record), file=self.inner.stream)
        except Exception:
            self.handleError(record)


def bar_safe_logging() -> None:
    """Where a bar is drawn (a terminal), log lines go around it."""
    root = logging.getLogger()
    for i, h in enumerate(list(root.handlers)):
        if type(h) is logging.StreamHandler and h.stream in (sys.stdout, sys.stderr) and h.stream.isatty():
            root.handlers[i] = _BarSafe(h)
