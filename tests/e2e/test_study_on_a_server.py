"""Sweeps beyond one machine: workers as separate processes on one Optuna study in a real PostgreSQL
server. Before: every launch built TPESampler(seed=0), so launches side by side asked the same
settings (5 trials, 2 distinct configurations); a launch after the study had its trials exited 1
with an empty sweep folder; and postgresql:// had no driver in any extra."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from helpers import postgres
from helpers.runs import REPO

pytestmark = [pytest.mark.slow, pytest.mark.skipif(postgres.skip_reason() is not None,
                                                   reason=postgres.skip_reason() or "")]
WORKER = ["trainer.max_epochs=2", "data.n_sentences=600", "logger=none", "maps.enabled=false", "test=false", "threads=1",
          "trainer.enable_progress_bar=false", "hydra.sweeper.heartbeat_interval=1", "hydra.sweeper.grace_period=5"]


@pytest.fixture(scope="module")
def pg():
    with postgres.server() as (port, url):
        yield port, url


def launch(url: str, study: str, n: int, folder, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), str(REPO)]), "PYTHONWARNINGS": "ignore"}
    return subprocess.Popen([sys.executable, "-m", "attnexp", "train", "-m", "hparams_search=optuna",
                             f"hydra.sweeper.storage={url}", f"hydra.sweeper.study_name={study}",
                             f"hydra.sweeper.n_trials={n}", *WORKER, f"hydra.sweep.dir={folder}", *extra],
                            cwd=folder.parent, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def test_three_workers_share_one_study_and_a_killed_workers_trial_runs_again(pg, tmp_path):
    import optuna

    _, url = pg
    n = 6
    workers = [launch(url, "shared", n, tmp_path / f"w{k}") for k in range(3)]
    victim = workers[0]
    deadline = time.time() + 120
    while time.time() < deadline:  # the first worker's first trial is running: kill the worker mid-trial
        try:
            study = optuna.load_study(study_name="shared", storage=url)
        except KeyError:  # no launch has made the study yet
            time.sleep(0.3)
            continue
        mine = [t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
                if str(t.user_attrs.get("launch", "")).endswith(f":{victim.pid}")]
        if mine:
            time.sleep(1.0)
            os.killpg(victim.pid, signal.SIGKILL)
            killed = mine[0].number
            break
        time.sleep(0.3)
    else:
        pytest.fail("the first worker never ran a trial")
    victim.wait()
    for w in workers[1:]:
        out, err = w.communicate(timeout=400)
        assert w.returncode == 0, err[-3000:]

    S = optuna.trial.TrialState
    study = optuna.load_study(study_name="shared", storage=url)
    trials = study.get_trials(deepcopy=False)
    finished = [t for t in trials if t.state in (S.COMPLETE, S.PRUNED)]
    assert len(finished) == n, [(t.number, t.state.name, t.user_attrs.get("launch"), t.user_attrs.get("surplus"),
                                 t.system_attrs.get("failed_trial")) for t in trials]
    assert not [t for t in trials if t.state in (S.RUNNING, S.WAITING)]
    dead = next(t for t in trials if t.number == killed)
    assert dead.state == S.FAIL  # failed by its silent heartbeat...
    retries = [t for t in finished if t.system_attrs.get("failed_trial") == killed]
    assert len(retries) == 1 and retries[0].params == dead.params  # ...and run again by another worker
    asked = [tuple(sorted(t.params.items())) for t in finished if t not in retries]
    assert len(set(asked)) == len(asked), asked  # no two launches asked the same settings
    seeds = [v["seed"] for k, v in study.user_attrs.items() if k.startswith("launch:")]
    assert len(seeds) == 3 and len(set(seeds)) == 3  # each launch's seed, recorded for a replay

    again = launch(url, "shared", n, tmp_path / "again")  # the same command once the study is done
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err[-2000:]
    assert f"already has its {n} trial(s)" in err + out and "nothing to run; best trial" in err + out
    assert not (tmp_path / "again").exists()


def test_a_server_that_cannot_be_used_is_one_line(pg, tmp_path, monkeypatch):
    from attnexp.launch.command_line import precheck

    port, url = pg
    monkeypatch.chdir(tmp_path)
    closed = postgres.free_port()
    problem = precheck(["hparams_search=optuna",
                        f"hydra.sweeper.storage=postgresql+psycopg://postgres:x@127.0.0.1:{closed}/optuna"], multirun=True)
    assert problem.startswith(f"hydra.sweeper.storage: cannot use postgresql+psycopg://postgres:***@127.0.0.1:{closed}/optuna:")
    assert "check that the server runs" in problem and "\n" not in problem
    wrong = url.replace(postgres.PASSWORD, "wrong")
    problem = precheck(["hparams_search=optuna", f"hydra.sweeper.storage={wrong}"], multirun=True)
    assert "password authentication failed" in problem and "wrong" not in problem and "\n" not in problem, problem
    postgres.sql(port, "postgres", "CREATE DATABASE other")
    postgres.sql(port, "other", "CREATE TABLE experiments (id int)")
    other = url.rsplit("/", 1)[0] + "/other"
    problem = precheck(["hparams_search=optuna", f"hydra.sweeper.storage={other}"], multirun=True)
    assert problem == (f"hydra.sweeper.storage: {other.replace(postgres.PASSWORD, '***')} is another tool's database "
                       f"(it holds tables experiments, which no Optuna study has); give Optuna a database of its own "
                       f"(CREATE DATABASE optuna)")
    import sqlalchemy

    with sqlalchemy.create_engine(other).connect() as conn:
        assert set(sqlalchemy.inspect(conn).get_table_names()) == {"experiments"}  # nothing written into it


def test_a_journal_file_holds_a_study_without_a_server(tmp_path):
    """journal:FILE: Optuna's JournalStorage on a shared filesystem, no server."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), str(REPO)]), "PYTHONWARNINGS": "ignore"}
    journal = tmp_path / "shared" / "study.log"
    r = subprocess.run([sys.executable, "-m", "attnexp", "train", "-m", "hparams_search=optuna",
                        f"hydra.sweeper.storage=journal:{journal}", "hydra.sweeper.study_name=j", "hydra.sweeper.n_trials=2",
                        *WORKER,
                        f"hydra.sweep.dir={tmp_path / 's'}"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    import optuna
    from optuna.storages.journal import JournalFileBackend

    study = optuna.load_study(study_name="j", storage=optuna.storages.JournalStorage(
        JournalFileBackend(str(journal))))
    assert len([t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]) == 2
