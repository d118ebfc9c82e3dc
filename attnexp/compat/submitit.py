"""What attnexp patches in submitit: the SLURM watcher's sacct command (SlurmInfoWatcher._make_command),
wrapped so sacct's "accounting storage is disabled" goes to /dev/null after its first call; its poll
(`update`), followed by squeue for the jobs sacct could not report; and Hydra's submitit launcher,
whose lost job (submitit's UncompletedJobError) is said in one line. tests/unit/test_private_apis.py
holds each to the installed versions."""

from __future__ import annotations

import re
import subprocess

LEFT_QUEUE = "LEFT_QUEUE"  # not a SLURM state: squeue no longer lists the job, so it has ended


def quiet_sacct(watcher) -> None:
    """Wrap `watcher._make_command` once: every sacct call after the first with its stderr dropped."""
    if getattr(watcher, "_attnexp_quiet", False):
        return
    make = watcher._make_command

    def command():
        cmd = make()
        if cmd is None or not watcher.num_calls:
            return cmd
        return ["sh", "-c", '"$@" 2>/dev/null', "sh", *cmd]  # the same sacct call, its stderr dropped

    watcher._make_command = command
    watcher._attnexp_quiet = True


def squeue_when_sacct_cannot(watcher) -> None:
    """Wrap `watcher.update` once: after sacct's poll, each job whose state is still UNKNOWN (sacct
    failed, as it does on every poll of a cluster without accounting) takes its state from squeue,
    and a job squeue no longer lists takes LEFT_QUEUE. submitit counts UNKNOWN as not finished and
    waits on it for ever, so a job that died before Python (a broken setup line, a missing
    interpreter: no result file, ever) hung its sweep; now the job counts as ended, and submitit
    looks for its result file (results_timeout_s, for slow file systems) and reports the job, with
    its stderr, when there is none."""
    if getattr(watcher, "_attnexp_squeue", False):
        return
    update = watcher.update
    ours: set[str] = set()  # the jobs whose state squeue gave: asked of sacct again at every poll

    def poll():
        for j in ours - watcher._finished:
            (watcher._info_dict.get(j) or {}).pop("State", None)
        update()
        unknown = sorted(j for j in watcher._registered - watcher._finished
                         if (watcher._info_dict.get(j) or {}).get("State", "UNKNOWN") == "UNKNOWN")
        states = squeue_states({j.split("_")[0] for j in unknown}) if unknown else None
        for j in unknown if states is not None else ():
            watcher._info_dict[j] = {**(watcher._info_dict.get(j) or {}), "State": states.get(j, LEFT_QUEUE)}
            ours.add(j)
            if watcher.is_done(j, mode="cache"):
                watcher._finished.add(j)

    watcher.update = poll
    watcher._attnexp_squeue = True


def squeue_states(job_ids: set[str]) -> dict[str, str] | None:
    """{job id (array tasks as 123_4): state} of these jobs as squeue lists them; {} when it knows
    none of them (ended and gone); None when squeue itself cannot say (no controller)."""
    try:
        r = subprocess.run(["squeue", "-h", "-r", "-o", "%i|%T", "-j", ",".join(sorted(job_ids))], capture_output=True,
                           text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        return {} if "Invalid job id" in r.stderr else None
    return dict(line.strip().split("|", 1) for line in r.stdout.splitlines() if "|" in line)


def lost_job_line(error: Exception) -> str:
    """submitit's UncompletedJobError (a job that ended without writing its result) in one line: the
    job, its state, where its logs are and the last line attnexp wrote to its error stream (else the
    stream's last line), and what to do."""
    text = str(error)
    job, state, path = (re.search(rx, text) for rx in (r"Job (\S+)", r"\(state: ([^)]*)\)", r"with path (\S+)_result\.pkl"))
    stream = text.split("-" * 40, 1)[1] if "Error stream produced" in text and "-" * 40 in text else ""
    lines = [line.strip() for line in stream.splitlines() if line.strip()]
    ours = [line for line in lines if line.startswith("attnexp:")]  # what attnexp said of it, before srun's own line
    last = (ours or lines or [""])[-1]
    why = (": squeue no longer lists it" + ("" if ours else ", perhaps it died before Python started")
           if state and state[1] == LEFT_QUEUE else "")
    return (f"SLURM job {job[1] if job else '?'} ended without a result (state {state[1] if state else '?'}{why}); "
            f"its logs: {path[1] + '_log.err' if path else '?'} and _log.out"
            + (f"; its last error line: {last[:300]}" if last else "")
            + "; the sweep's other jobs go on (squeue --me), and the same command with resume=auto continues the sweep")


def lost_jobs_in_one_line() -> None:
    """Wrap the Hydra submitit launcher's `launch` once: a job that ended without its result raised
    submitit's UncompletedJobError through Hydra, which printed it under a traceback; it is now a
    CompactHydraException, which Hydra prints as its one line (lost_job_line), exiting 1."""
    from hydra.errors import CompactHydraException
    from submitit.core.utils import UncompletedJobError

    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import BaseSubmititLauncher

    if getattr(BaseSubmititLauncher, "_attnexp_lost_jobs", False):
        return
    launch = BaseSubmititLauncher.launch

    def wrapped(self, *args, **kwargs):
        try:
            return launch(self, *args, **kwargs)
        except UncompletedJobError as e:
            raise CompactHydraException("attnexp: " + lost_job_line(e)) from None

    BaseSubmititLauncher.launch = wrapped
    BaseSubmititLauncher._attnexp_lost_jobs = True
