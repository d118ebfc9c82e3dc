"""How a run stops early: a signal (SIGTERM from a cluster's preemption, SIGINT from Ctrl-C, SIGUSR2
from SLURM through submitit), a loss that stopped being a number, or Optuna's pruner. Each ends
with a checkpoint where one is worth keeping and a summary saying what happened; `status_for`
is the one place an exception becomes a status (the command line turns statuses into exit codes)."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import threading
from pathlib import Path

from attnexp.compat.lightning import on_last_batch, request_stop
from attnexp.config import ConfigError
from attnexp.results.summary import Status

# SIGUSR2: what SLURM sends through submitit before a job's time limit or at its preemption
_NAMES = {signal.SIGTERM: "SIGTERM", signal.SIGINT: "SIGINT", signal.SIGUSR2: "SIGUSR2"}


class Interrupted(BaseException):
    """A stop signal outside the training loop (data setup, testing): not an Exception, so no
    generic `except Exception` swallows it."""

    def __init__(self, signame: str):
        super().__init__(signame)
        self.signame = signame


class Pruned(Exception):
    """An Optuna trial the pruner stopped: its per-epoch value was worse than the other trials'."""


class Diverged(Exception):
    """A loss or monitored value that is no longer a number; no checkpoint of it is kept."""


# What torch.save's zip writer says when a write comes up short (it reports no errno)
_TORCH_SHORT_WRITE = ("unexpected pos", "PytorchStreamWriter failed writing", "file write failed")


def causes(exc: BaseException | None):
    """`exc` and every exception it came from (__cause__, else __context__), each once."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def disk_full(exc: BaseException) -> bool:
    """Whether `exc` (or an exception it came from) is a write that found no space left."""
    return any((isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT))
               or (isinstance(e, RuntimeError) and any(m in str(e) for m in _TORCH_SHORT_WRITE)) for e in causes(exc))


def unwritable(exc: BaseException) -> str | None:
    """One line for a write that a read-only or forbidden place refused mid-run (a folder of the run
    made unwritable, or remounted read-only, while it trained), or None: it named the file and the
    errno, under a 40-frame traceback."""
    refused = next((e for e in causes(exc) if isinstance(e, OSError) and e.filename
                    and e.errno in (errno.EROFS, errno.EACCES, errno.EPERM)), None)
    if refused is None:
        return None
    where = Path(str(refused.filename)).parent
    return (f"cannot write {refused.filename}: {os.strerror(refused.errno).lower()}; make {where} writable again and "
            f"continue the run with resume=auto (the checkpoints written so far are kept)")


def disk_full_message(folder: Path | str, n_params: int | None) -> str:
    """One line: the folder, its free space, and what a checkpoint of this model takes (fp32
    weights and AdamW's two moments)."""
    folder = Path(folder)
    try:
        free = f"{shutil.disk_usage(folder).free / 2**20:.1f} MB free"
    except OSError:
        free = "no free space"
    need = ""
    if n_params:
        mb = 3 * 4 * n_params / 2**20
        need = f"; each checkpoint of this model takes about {mb:.1f} MB (best and last: {2 * mb:.1f} MB, and the maps more)"
    return (f"disk full: {folder} has {free}{need}; free space there or give the run another folder "
            f"(hydra.run.dir=DIR, hydra.sweep.dir=DIR)")


class QuietDiskFullThreads:
    """While a run lives, a helper thread (TensorBoard's event writer) that dies of a full disk prints
    nothing: the run's own handling says it in one line, with no thread's traceback before it."""

    def __enter__(self):
        self._previous = threading.excepthook

        def hook(args):
            if not disk_full(args.exc_value):
                self._previous(args)

        threading.excepthook = hook
        return self

    def __exit__(self, *exc):
        threading.excepthook = self._previous
        return False


def lightning_refused(exc: BaseException) -> str | None:
    """Lightning's refusal of a setting it cannot run (a limit below one batch a rank) as a config
    error's one line, or None. Said the same wherever it is caught: the recorder's on_exception and
    fit's handler both see it, and on a DDP rank either may write the summary first."""
    from lightning.fabric.utilities.exceptions import MisconfigurationException

    return f"trainer: {' '.join(str(exc).split())}" if isinstance(exc, MisconfigurationException) else None


def status_for(exc: BaseException) -> Status:
    """The status a run that ended with `exc` records."""
    from lightning.pytorch.utilities.exceptions import SIGTERMException

    if isinstance(exc, (Interrupted, SIGTERMException, KeyboardInterrupt)):
        return Status.INTERRUPTED
    if isinstance(exc, ConfigError) or lightning_refused(exc):
        return Status.CONFIG_ERROR
    if isinstance(exc, Diverged):
        return Status.DIVERGED
    if isinstance(exc, Pruned):
        return Status.PRUNED
    return Status.FAILED


class StopSignals:
    """Installed for the length of a run. The first SIGTERM or SIGINT during fit asks Lightning to
    stop after the current step (its own SIGTERM path, `received_sigterm`; after the validation pass
    when one is running), so the checkpoint holds a consistent state; outside fit, or at a second
    signal, it raises `Interrupted` at once."""

    def __init__(self):
        self.received: str | None = None
        self.pending = False  # a signal that waits for the validation pass in progress (guards.StopGuard)
        self.trainer = None  # set while the trainer fits or tests
        self._previous: dict = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in _NAMES:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}
        return False

    def chain(self) -> None:
        """After the run stopped cleanly, the handler installed before ours for that signal, if it
        is a program's own (submitit's requeue on SIGUSR2): it runs as it would have, just later."""
        sig = next((k for k, v in _NAMES.items() if v == self.received), None)
        previous = self._previous.get(sig)
        if callable(previous) and previous is not signal.default_int_handler:
            previous(sig, None)

    def _handle(self, signum, frame):
        first = self.received is None
        self.received = self.received or _NAMES[signum]
        t = self.trainer
        if first and t is not None:
            last = t.training and on_last_batch(t)
            if t.validating or t.sanity_checking or last:  # a validation pass is running or next: stop once it is
                request_stop(t, False)  # over (Lightning's own handler, which ran first on
                self.pending = True  # SIGTERM, would cut it short)
            else:
                request_stop(t)  # Lightning raises SIGTERMException after this step
            return
        raise Interrupted(self.received)
