"""A stop signal before the run starts (issue 52): on a loaded SLURM node the job's checks and the
Lightning import take seconds, and SLURM's warning (SIGUSR2, through submitit) could land there. It
left no record, and a job submitit would not requeue ended "Job completed successfully" with none
(the attack pass saw it on the real cluster). Now the job writes a record saying so, runs the handler
installed before its own (submitit's requeue, or its refusal, said) and exits with the signal's code.
The real cluster's version is tests/e2e/test_slurm.py's."""

from __future__ import annotations

import json
import os
import signal

import pytest

from attnexp.cli import main


class Refused(Exception):
    """What submitit raises when it will not requeue (its UncompletedJobError)."""


def test_a_signal_during_the_checks_leaves_a_record_and_runs_the_handler_before_ours(tmp_path, monkeypatch, capsys):
    import attnexp.launch.load as load

    checked = load.load_run

    def signalled(*a, **kw):  # SLURM's warning arrives while the job checks its config (not the check before Hydra)
        if len(a) > 1:  # the job's call gives its start time; the check before Hydra's does not
            os.kill(os.getpid(), signal.SIGUSR2)
        return checked(*a, **kw)

    seen = []

    def submitits(signum, frame):  # stands in for submitit's checkpoint_and_try_requeue
        seen.append(signum)
        raise Refused("Job not requeued because: timed-out too many times.")

    monkeypatch.setattr(load, "load_run", signalled)
    previous = signal.signal(signal.SIGUSR2, submitits)
    try:
        with pytest.raises(SystemExit) as e:
            main(["train", "logger=none", f"hydra.run.dir={tmp_path}"])
    finally:
        signal.signal(signal.SIGUSR2, previous)
    assert e.value.code == 140 and seen == [signal.SIGUSR2]
    record = json.loads((tmp_path / "summary.json").read_text())
    assert record["status"] == "interrupted" and record["signal"] == "SIGUSR2"
    assert record["error"] == "stopped by SIGUSR2 before the run started"
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"attnexp: stopped by SIGUSR2 before the run started (Job not requeued because: timed-out too many "
                   f"times.) in {tmp_path}"]
    assert not (tmp_path / "checkpoints").exists()


def test_a_lost_jobs_line_quotes_what_attnexp_said_before_sruns_last_line():
    from attnexp.compat import submitit as s

    text = ("Job 7 (task: 0) with path /runs/.submitit/7/7_0_result.pkl\nhas not produced any output (state: LEFT_QUEUE)\n"
            "Error stream produced:\n" + "-" * 40 + "\nattnexp: stopped by SIGUSR2 before the run started in /runs/0_\n"
            "srun: error: vm: task 0: Exited with exit code 140\n")
    line = s.lost_job_line(Exception(text))
    assert "its last error line: attnexp: stopped by SIGUSR2 before the run started in /runs/0_" in line
    assert "perhaps it died before Python started" not in line
