"""An Optuna sweep whose launch is killed mid-trial, continued with the same command and resume=auto
into the same sweep folder (what the "continue them" line says). The study fails the dead trial by its
silent heartbeat and asks its settings again; before, the retry trained afresh in another folder
(a new number's, or the launch's job index's: trial0/, which held another trial's run) and the dead
trial's half-run folder was listed as unfinished by every later launch."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from helpers.runs import REPO

ARGS = ["-m", "hparams_search=optuna", "hydra.sweeper.study_name=p", "hydra.sweeper.n_trials=1",
        "hydra.sweeper.heartbeat_interval=1", "hydra.sweeper.grace_period=3", "data.n_sentences=3000",
        "trainer.max_epochs=4", "logger=none", "maps.enabled=false", "test=false", "trainer.enable_progress_bar=false"]


@pytest.mark.slow
def test_a_killed_launchs_trial_continues_in_its_folder_from_its_checkpoint(tmp_path):
    optuna = pytest.importorskip("optuna", reason="needs Optuna (pip install -e '.[sweep]')")
    db, root = f"sqlite:///{tmp_path / 'p.db'}", tmp_path / "sweep"
    cmd = [sys.executable, "-m", "attnexp", "train", *ARGS, f"hydra.sweeper.storage={db}", f"hydra.sweep.dir={root}"]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    first = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    deadline = time.time() + 180
    while not (root / "trial0" / "checkpoints" / "last.ckpt").is_file():  # an epoch done: kill the launch mid-trial
        assert time.time() < deadline and first.poll() is None, "the first launch wrote no checkpoint"
        time.sleep(0.2)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    time.sleep(4)  # past the grace period: the trial's heartbeat is stale
    r = subprocess.run([*cmd, "resume=auto"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    trials = optuna.load_study(study_name="p", storage=db).trials
    dead, retry = trials[0], trials[-1]
    S = optuna.trial.TrialState
    assert dead.state == S.FAIL and retry.state == S.COMPLETE and retry.system_attrs["failed_trial"] == 0
    assert retry.params == dead.params and retry.user_attrs["run_dir"] == str(root / "trial0")
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == ["trial0"]  # no folder of the retry's own
    import json

    s = json.loads((root / "trial0" / "summary.json").read_text())
    assert s["status"] == "completed" and s["epochs"] == 4 and s["resumed_from"]  # continued, not started again
    assert s["metrics"]["best"]["value"] == pytest.approx(retry.value)
