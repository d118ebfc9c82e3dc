"""How many threads a run trains with: `threads=N`, the launcher's share, or the cores other
processes leave free when the run starts (a thread a core spins OpenMP threads against a busy core)."""

from __future__ import annotations

import logging
import os
import time

from attnexp.config import Run

log = logging.getLogger("attnexp")


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
