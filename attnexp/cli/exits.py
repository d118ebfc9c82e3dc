"""How a command's outcome becomes its exit code: one table."""

from __future__ import annotations

from attnexp.results.summary import Status

EXIT = {Status.COMPLETED: 0, Status.FAILED: 1, Status.CONFIG_ERROR: 2, Status.DIVERGED: 3, Status.PRUNED: 0,
        "SIGINT": 130, "SIGTERM": 143, "SIGUSR2": 140}  # SIGUSR2: SLURM's warning through submitit; all resumable
SWEEP_FAILED = 1  # a sweep in which some job failed, diverged or had a config error


def exit_code(status: Status, signal: str | None = None) -> int:
    """A single run's code; an interrupted run exits with its signal's."""
    if status == Status.INTERRUPTED:
        return EXIT[signal or "SIGTERM"]
    return EXIT[Status(status)]
