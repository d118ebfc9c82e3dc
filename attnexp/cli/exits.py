"""How a command's outcome becomes its exit code (one table), and a job that stopped said in one line."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from attnexp.results import summary
from attnexp.results.summary import Status

log = logging.getLogger("attnexp")

EXIT = {Status.COMPLETED: 0, Status.FAILED: 1, Status.CONFIG_ERROR: 2, Status.DIVERGED: 3, Status.PRUNED: 0,
        "SIGINT": 130, "SIGTERM": 143, "SIGUSR2": 140}  # SIGUSR2: SLURM's warning through submitit; all resumable
SWEEP_FAILED = 1  # a sweep in which some job failed, diverged or had a config error


def exit_code(status: Status, signal: str | None = None) -> int:
    """A single run's code; an interrupted run exits with its signal's."""
    if status == Status.INTERRUPTED:
        return EXIT[signal or "SIGTERM"]
    return EXIT[Status(status)]


def stopped_at_start(out: Path, signame: str, early, job) -> None:
    """A stop signal before the run started: a record saying so, then what was installed before ours
    for it (submitit's: it requeues the job and exits, or says why not), and the signal's exit code:
    a sweep on SLURM names a job that ended so in its one-line failure list."""
    said = f"stopped by {signame} before the run started"
    try:
        summary.write(out / summary.NAME, summary.error_record(out, Status.INTERRUPTED, said, job, signal=signame))
    except OSError:  # a full or read-only disk: the line below still says it
        pass
    try:
        early.chain()  # submitit's requeue exits here (the requeued job continues with resume=auto)
    except Exception as e:  # submitit would not requeue it (e.g. timed out too many times): said, and the job ends
        said += f" ({' '.join(str(e).split())[:200]})"
    print(f"attnexp: {said} in {out}", file=sys.stderr, flush=True)
    raise SystemExit(EXIT[signame]) from None


def one_line_failure(said: str, sweep: bool, status: Status = Status.FAILED) -> None:
    """A failed run of a single command is one line and its exit code; a sweep's job logs it and the
    sweep goes on."""
    if not sweep:
        print(f"attnexp: {said}", file=sys.stderr)
        raise SystemExit(EXIT[status]) from None
    log.error("%s", said)


def disk_is_full(out: Path, sweep: bool) -> None:
    """A full disk is one line (the run's record says it too, where it could be written), not a traceback."""
    from attnexp.training.stops import disk_full_message

    try:
        said = summary.read(out / summary.NAME).get("error") or ""
    except summary.SummaryError:
        said = ""
    one_line_failure(said if said.startswith("disk full") else disk_full_message(out, None), sweep)


def config_error(e: Exception, out: Path, sweep: bool) -> None:
    one_line_failure(f"config error: {e}" if not sweep else f"config error in {out}: {e}", sweep, Status.CONFIG_ERROR)
