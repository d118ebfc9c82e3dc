"""What the command line adds to a sweep's Hydra overrides so each job knows its place: folder names
that say only the swept settings (which is also how a job learns which keys are swept), and for
jobs run side by side on this machine, each job's share of the cores."""

from __future__ import annotations

import os


def sweep_dirname_overrides(overrides: list[str]) -> list[str]:
    """Hydra names a job's folder after all its overrides (~170 characters with a few fixed
    ones); keep only the swept keys in it: `3_attention=alibi,seed=1`. The job reads the same
    exclusion back to know which of its overrides the sweep varies (attnexp.launch.load). Which
    override sweeps is Hydra's parser's answer (a list value `[a,b]` does not, `choice(a,b)` does)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = [o for o in OverridesParser.create().parse_overrides(overrides) if not o.key_or_group.startswith("hydra")]
    fixed = sorted({o.key_or_group for o in parsed} - {o.key_or_group for o in parsed if o.is_sweep_override()})
    return [f"hydra.job.config.override_dirname.exclude_keys=[{','.join(fixed)}]"] if fixed else []


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def share(n_parallel: int | None) -> int:
    """CPU threads for one of `n_parallel` jobs sharing this machine: each gets its share of the
    cores, not all of them (two jobs each running on every core ran ~9x slower than alone)."""
    return max(1, cores() // max(1, n_parallel or 1))


def job_overrides(plan) -> list[str]:
    """The overrides a multirun adds for its jobs: folder names, Hydra's .hydra/ files left to the job
    (Hydra wrote them before the job could refuse a folder that holds another run), and for jobs side by
    side on this machine their CPU share as the launcher's cpus_per_task (unless the config sets one). `plan`:
    attnexp.launch.plan.Plan, whose composed config says the launcher and how many jobs run at once."""
    extra = sweep_dirname_overrides(plan.overrides)
    if plan.hydra_subdir is not None:  # written by the job itself once the folder is its own (cli/train.job)
        extra.append("hydra.output_subdir=null")
    if plan.parallel and not plan.cpus_given:
        extra.append(f"hydra.launcher.cpus_per_task={share(plan.parallel)}")
    return extra


class _Once:
    """A logging filter that lets the first of submitit's "Bypassing sacct error" warnings through,
    with what it means, and drops the rest (one a poll, every few seconds, for the whole sweep)."""

    def __init__(self):
        self.said = False

    def filter(self, record) -> bool:
        if "Bypassing sacct error" not in record.getMessage():
            return True
        if self.said:
            return False
        self.said = True
        record.msg = ("sacct cannot report job states on this cluster (accounting is off?); submitit follows the "
                      "jobs through their files instead (said once)")
        record.args = ()
        return True


def adapt_submitit() -> None:
    """submitit polls `sacct` for job states. On a cluster without accounting, sacct fails every poll:
    submitit then warned each time (three lines, every few seconds) and sacct printed "Slurm accounting
    storage is disabled" to the terminal. Its warning now appears once (`_Once`), and sacct's own
    stderr only on the first poll; the jobs' states come from squeue instead, so a job that died
    before Python ends the sweep (it hung it), said in one line. (submitit offers no setting for
    any of it: compat.submitit wraps its watcher and Hydra's launcher.)"""
    try:
        from submitit.slurm.slurm import SlurmJob
    except ImportError:
        return
    import logging

    lg = logging.getLogger("submitit")
    if not any(isinstance(f, _Once) for f in lg.filters):
        lg.addFilter(_Once())
        for h in list(lg.handlers):  # Hydra's root handler prints (and logs) it: not twice
            lg.removeHandler(h)
        lg.propagate = True
    from attnexp.compat.submitit import lost_jobs_in_one_line, quiet_sacct, squeue_when_sacct_cannot

    quiet_sacct(SlurmJob.watcher)
    squeue_when_sacct_cannot(SlurmJob.watcher)  # without accounting, a job that died before Python hung the sweep
    try:
        lost_jobs_in_one_line()  # such a job is said in one line, not under a traceback
    except ImportError:  # submitit without Hydra's launcher plugin: nothing launches through it
        pass
