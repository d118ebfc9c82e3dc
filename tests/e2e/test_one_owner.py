"""A run folder has one owner (attnexp.results.folder). Before: two runs started 2 s apart with the
same hydra.run.dir both said "run completed" and overwrote each other's checkpoints, and a fresh run
into a finished run's folder mixed the old run's best-*.ckpt into its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from attnexp.cli import main
from attnexp.results import folder
from helpers.runs import attnexp

FAST = ["trainer.max_epochs=1", "data.n_sentences=200", "logger=none", "maps.enabled=false", "test=false",
        "trainer.enable_progress_bar=false"]


def held_by(run_dir, pid: int) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    rec = {"pid": pid, "started": folder._started(pid), "host": os.uname().nodename, "since": "2026-11-26 09:00:00"}
    (run_dir / folder.LOCK).write_text(json.dumps(rec))


def test_a_folder_a_live_run_holds_is_refused_before_anything_is_written(tmp_path, capsys):
    run = tmp_path / "run"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        held_by(run, other.pid)
        assert main(["train", *FAST, f"hydra.run.dir={run}"]) == 2
        err = capsys.readouterr().err.strip()
        assert err == (f"attnexp: {run} is in use by another attnexp run (PID {other.pid}, since 2026-11-26 09:00:00); "
                       f"wait for it to end, or give this run its own folder with hydra.run.dir=DIR"), err
        assert sorted(p.name for p in run.iterdir()) == [folder.LOCK]  # no .hydra/, no summary.json
    finally:
        other.kill()
        other.wait()


def test_a_stale_lock_is_taken_over_and_removed_at_the_end(tmp_path):
    run = tmp_path / "run"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    held_by(run, gone.pid)  # its PID is dead
    assert main(["train", *FAST, f"hydra.run.dir={run}"]) == 0
    assert json.loads((run / "summary.json").read_text())["status"] == "completed"
    assert not (run / folder.LOCK).exists()
    held_by(run, os.getppid())
    assert folder.taken(run) is not None  # a live holder
    reused = {**json.loads((run / folder.LOCK).read_text()), "started": "1"}  # that PID, but another process now
    (run / folder.LOCK).write_text(json.dumps(reused))
    assert folder.taken(run) is None


def test_a_fresh_run_into_a_finished_runs_folder_is_refused_and_resume_continues(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", *FAST, f"hydra.run.dir={run}"]) == 0
    before = {p.name: p.stat().st_mtime_ns for p in (run / "checkpoints").iterdir()}
    record = (run / "summary.json").read_bytes()
    assert main(["train", *FAST, f"hydra.run.dir={run}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"attnexp: {run} already holds a run (best-epoch00.ckpt, last.ckpt); continue it with "
                          f"resume=auto, or give the new run its own folder with hydra.run.dir=DIR"), err
    assert {p.name: p.stat().st_mtime_ns for p in (run / "checkpoints").iterdir()} == before
    assert (run / "summary.json").read_bytes() == record
    assert main(["train", *FAST, f"hydra.run.dir={run}", "resume=auto"]) == 0  # its own run, continued


@pytest.mark.slow
def test_two_runs_started_two_seconds_apart_into_one_folder(tmp_path):
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    first = subprocess.Popen([sys.executable, "-m", "attnexp", "train", "trainer.max_epochs=4", "data.n_sentences=2000",
                              "logger=none", "test=false", "trainer.enable_progress_bar=false", f"hydra.run.dir={run}"],
                             cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2)
    while not (run / folder.LOCK).exists() and first.poll() is None:
        time.sleep(0.2)
    second = attnexp("train", *FAST, f"hydra.run.dir={run}", cwd=tmp_path)
    out, err = first.communicate(timeout=300)
    assert first.returncode == 0, err[-2000:]
    assert second.returncode == 2 and "is in use by another attnexp run" in second.stderr, second.stderr[-2000:]
    s = json.loads((run / "summary.json").read_text())
    assert s["status"] == "completed" and s["epochs"] == 4 and not (run / folder.LOCK).exists()


@pytest.mark.parametrize("kind", ["folder", "pipe"])
def test_a_lock_that_is_not_a_file_is_one_line(kind, tmp_path, capsys):
    """Issue 52. Before: `.attnexp.lock` made a folder was a traceback (unlink of a folder); a named pipe
    of that name would have hung the check that reads it."""
    run = tmp_path / "run"
    run.mkdir()
    (run / folder.LOCK).mkdir() if kind == "folder" else os.mkfifo(run / folder.LOCK)
    assert main(["train", *FAST, f"hydra.run.dir={run}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "is not attnexp's lock (a folder, a pipe or a link); move it away" in err, err
    assert sorted(p.name for p in run.iterdir()) == [folder.LOCK]  # nothing written
