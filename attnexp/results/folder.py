"""A run folder has one owner at a time. A live run holds `.attnexp.lock` (its PID, the PID's start
time, the host and any SLURM job); a second run into the same folder is refused in one line while
the first lives, and takes the folder over once it is gone (a stale lock: a dead PID, or a PID that
now belongs to another process). A fresh run (no `resume=`) into a folder that already holds a run's
checkpoints is refused too: never two runs' checkpoints mixed in one folder."""

from __future__ import annotations

import json
import os
import socket
import time
from contextlib import contextmanager
from pathlib import Path

from attnexp.config import ConfigError, layout, split_override

LOCK = layout.LOCK


class FolderTaken(ConfigError):
    """The run folder belongs to another run: nothing of this one is written there."""


def _started(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat, field 22), or None."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _mine() -> dict:
    return {"pid": os.getpid(), "started": _started(os.getpid()), "host": socket.gethostname(),
            "slurm_job": os.environ.get("SLURM_JOB_ID"), "since": time.strftime("%Y-%m-%d %H:%M:%S")}


def holder(folder: Path) -> dict | None:
    """Who holds `folder` now (the lock's record), or None when nobody does or the holder is gone."""
    from attnexp.config.files import read_json

    try:  # the one reading rule: a pipe or a 2 GB file named like the lock is not waited on nor read
        rec = read_json(Path(folder) / LOCK, 4096)
        pid = int(rec["pid"])
    except (OSError, ValueError, KeyError, TypeError):  # ValueError: FileRefused
        return None  # no lock, or not one attnexp wrote: nobody to wait for
    if rec.get("slurm_job") and rec.get("slurm_job") == os.environ.get("SLURM_JOB_ID"):
        return None  # a requeued SLURM job: its earlier run was ended by the scheduler
    if rec.get("host") != socket.gethostname():
        return rec  # another machine's run: its PID cannot be checked from here
    if pid == os.getpid():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return rec if rec.get("started") in (None, _started(pid)) else None  # a reused PID is not the run


def taken(folder: Path) -> str | None:
    """One line when a live run holds `folder` (or something that is not attnexp's lock sits where it
    goes: nothing can take the folder then), else None."""
    path = Path(folder) / LOCK
    if path.is_symlink() or path.exists() and not path.is_file():  # a folder, a pipe or a link
        return (f"{path} is not attnexp's lock (a folder, a pipe or a link); move it away, or give this run its own "
                f"folder with hydra.run.dir=DIR (nothing was written)")
    rec = holder(folder)
    if rec is None:
        return None
    where = "" if rec.get("host") == socket.gethostname() else f" on {rec.get('host')}"
    return (f"{folder} is in use by another attnexp run (PID {rec.get('pid')}{where}, since {rec.get('since')}); "
            f"wait for it to end, or give this run its own folder with hydra.run.dir=DIR"
            + (f" (if that run is gone, delete {Path(folder) / LOCK})" if where else ""))


def earlier_run(folder: Path, resume: str | None) -> str | None:
    """One line when a fresh run (no resume=) would write into a folder holding a run's checkpoints."""
    ckpts = sorted(p.name for p in (Path(folder) / layout.CHECKPOINTS).glob("*.ckpt")) if resume is None else []
    if not ckpts:
        return None
    return (f"{folder} already holds a run ({', '.join(ckpts[:3])}{' ...' if len(ckpts) > 3 else ''}); continue it "
            f"with resume=auto, or give the new run its own folder with hydra.run.dir=DIR (nothing was changed there)")


def other_settings(folder: Path, resume: str | None, job) -> str | None:
    """One line when a sweep's job continuing its folder (resume=auto) finds there a run made with other
    values of the keys the sweep varies (`job`: its JobContext): another study's trial, or an earlier
    launch's of a study kept in memory. That run is not this job's, nor its result this job's value."""
    if resume != "auto" or job is None or not job.swept:
        return None
    from attnexp.results import summary

    try:
        theirs = summary.read(Path(folder) / layout.SUMMARY)["overrides"] or []
    except summary.SummaryError:
        return None
    keys = set(job.swept) - {"resume"}  # how a run starts, not what it is (a retried trial is given resume=auto)
    theirs, mine = (sorted(o for o in overrides if split_override(o)[0] in keys) for overrides in (theirs, job.overrides))
    if theirs == mine:
        return None
    return (f"{folder} holds a run made with other settings ({' '.join(theirs)}), not this job's; give this sweep a "
            f"folder of its own with hydra.sweep.dir=DIR (nothing was changed there)")


def rank_zero() -> bool:
    """The process that owns the folder: not another rank of a distributed run (Lightning's DDP
    children, srun's tasks), which write into the folder their rank 0 holds."""
    return all(os.environ.get(k, "0") == "0" for k in ("RANK", "LOCAL_RANK", "SLURM_PROCID", "NODE_RANK"))


@contextmanager
def owned(folder: Path, resume: str | None, job=None):
    """Hold `folder` for one run: FolderTaken (nothing written) while another live run holds it, a
    fresh run would mix with an earlier one's checkpoints, or a sweep's job (`job`: its JobContext)
    would continue another's; the lock is removed when the run ends."""
    folder = Path(folder)
    if not rank_zero():
        yield
        return
    problem = taken(folder) or earlier_run(folder, resume) or other_settings(folder, resume, job)
    if problem:
        raise FolderTaken(problem)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK
    path.unlink(missing_ok=True)  # stale: its holder is gone (checked above)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:  # another run took it between the check and now
        raise FolderTaken(taken(folder) or f"{folder} was just taken by another attnexp run; give this run its own "
                                              f"folder with hydra.run.dir=DIR") from None
    with os.fdopen(fd, "w") as f:
        json.dump(_mine(), f)
    try:
        yield
    finally:
        try:
            from attnexp.config.files import read_json

            if read_json(path, 4096).get("pid") == os.getpid():
                path.unlink()
        except (OSError, ValueError, AttributeError):
            pass
