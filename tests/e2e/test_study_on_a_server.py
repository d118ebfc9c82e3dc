"""Sweeps beyond one machine: workers as separate processes on one Optuna study in a real PostgreSQL
server. Before: every launch built TPESampler(seed=0), so launches side by side asked the same
settings (5 trials, 2 distinct configurations); a launch after the study had its trials exited 1
with an empty sweep folder; and postgresql:// had no driver in any extra."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import postgres
from helpers.browser import needs_chromium
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


@pytest.fixture(scope="module")
def shared(pg, tmp_path_factory):
    """Three workers launched side by side on one study of n_trials=6; the first of them seen running a
    trial is SIGKILLed mid-trial; the other two are waited for. Yields (url, n, killed trial, folder)."""
    import optuna

    _, url = pg
    n, folder = 6, tmp_path_factory.mktemp("workers")
    workers = [launch(url, "shared", n, folder / f"w{k}") for k in range(3)]
    deadline = time.time() + 300  # three launches starting on 2 busy cores: a minute or more before a first trial
    while time.time() < deadline:  # a worker's trial is running: kill that worker mid-trial
        try:
            study = optuna.load_study(study_name="shared", storage=url)
        except KeyError:  # no launch has made the study yet
            time.sleep(0.3)
            continue
        running = {str(t.user_attrs.get("launch", "")).rsplit(":", 1)[-1]: t.number
                   for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))}
        victim = next((w for w in workers if str(w.pid) in running), None)
        if victim is not None:
            time.sleep(1.0)
            os.killpg(victim.pid, signal.SIGKILL)
            killed = running[str(victim.pid)]
            break
        time.sleep(0.3)
    else:
        for w in workers:
            os.killpg(w.pid, signal.SIGKILL)
        pytest.fail("no worker ran a trial within 300 s")
    victim.wait()
    for w in workers:
        if w is not victim:
            out, err = w.communicate(timeout=400)
            assert w.returncode == 0, err[-3000:]
    yield url, n, killed, folder


def test_three_workers_share_one_study_and_a_killed_workers_trial_runs_again(shared):
    import optuna

    url, n, killed, tmp_path = shared
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


@needs_chromium
def test_optuna_dashboard_shows_the_workers_study_on_the_server(shared, tmp_path):
    """optuna-dashboard started against the PostgreSQL study the three workers shared (as a user on
    any node would: `optuna-dashboard postgresql+psycopg://...`): every finished trial with its value
    and run folder through its API, then a Chromium screenshot; the password never printed."""
    pytest.importorskip("optuna_dashboard", reason="needs optuna-dashboard (pip install -e '.[sweep]')")
    url, n, killed, _ = shared
    r = subprocess.run([sys.executable, "scripts/studies/dashboards.py", "--parts=optuna", f"--storage={url}",
                        f"--out={tmp_path}"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert postgres.PASSWORD not in r.stdout + r.stderr
    found = json.loads(r.stdout[r.stdout.index("{"):])  # nothing trained here: the JSON is all it prints
    assert found["study"] == "shared" and found["storage"] == url.replace(postgres.PASSWORD, "***")
    done = [i for i, s in enumerate(found["trial_states"]) if s in ("Complete", "Pruned")]
    assert len(done) == n and found["trial_states"][found["numbers"].index(killed)] == "Fail"
    assert all(Path(found["run_dirs"][i], "summary.json").is_file() for i in done)  # each trial leads to its run
    png = tmp_path / "optuna_dashboard.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 30_000
    port = url.rsplit(":", 1)[1].split("/")[0]
    left = subprocess.run(["pgrep", "-f", f"optuna-dashboard postgresql.*{port}"], capture_output=True, text=True)
    assert left.stdout.strip() == "", "the optuna-dashboard server was not stopped"


def test_a_server_that_cannot_be_used_is_one_line(pg, tmp_path, monkeypatch):
    """Through the command line's own steps: its password taken out into PGPASSWORD (issue 49: a URL
    checked afterwards holds none), then the precheck."""
    from attnexp.config.secrets import take_passwords
    from attnexp.launch.command_line import precheck

    def checked(overrides):
        return precheck(take_passwords(overrides)[0], multirun=True)

    port, url = pg
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PGPASSWORD", raising=False)
    closed = postgres.free_port()
    problem = checked(["hparams_search=optuna", f"hydra.sweeper.storage=postgresql+psycopg://postgres:x@127.0.0.1:{closed}/optuna"])
    assert problem.startswith(f"hydra.sweeper.storage: cannot use postgresql+psycopg://postgres@127.0.0.1:{closed}/optuna:")
    assert "check that the server runs" in problem and "\n" not in problem
    wrong = url.replace(postgres.PASSWORD, "wrong")
    problem = checked(["hparams_search=optuna", f"hydra.sweeper.storage={wrong}"])
    assert "password authentication failed" in problem and "wrong" not in problem and "\n" not in problem, problem
    # a password that reached the composed config some other way (a yaml, an interpolation) is refused
    problem = precheck(["hparams_search=optuna", f"hydra.sweeper.storage={url}"], multirun=True)
    assert "holds a password" in problem and postgres.PASSWORD not in problem and "\n" not in problem, problem
    postgres.sql(port, "postgres", "CREATE DATABASE other")
    postgres.sql(port, "other", "CREATE TABLE experiments (id int)")
    other = url.rsplit("/", 1)[0] + "/other"
    problem = checked(["hparams_search=optuna", f"hydra.sweeper.storage={other}"])
    assert problem == (f"hydra.sweeper.storage: {other.replace(':' + postgres.PASSWORD, '')} is another tool's database "
                       f"(it holds tables experiments, which no Optuna study has); give Optuna a database of its own "
                       f"(CREATE DATABASE optuna)")
    import sqlalchemy

    with sqlalchemy.create_engine(other).connect() as conn:
        assert set(sqlalchemy.inspect(conn).get_table_names()) == {"experiments"}  # nothing written into it


SECRET = "S3cr@t:p/w%x"  # "@", ":", "/" and a "%" that is no escape: each has broken a masking before


def secret_hits(text: str) -> bool:
    return any(s in text for s in (SECRET, "S3cr@t", "S3cr%40t"))


def test_a_sweeps_password_is_never_printed_nor_written(pg, tmp_path):
    """Issue 49: the password given as docs/sweeps.md shows it (USER:PASSWORD@HOST) was printed in every
    launch's first line and written into optuna_results.json and every job's .hydra/. A sweep of two
    trials on the real server: the console, every file under the sweep (its jobs' run folders
    included), `compare study=` and its error for a server that is down hold it nowhere."""
    port, _ = pg
    postgres.sql(port, "postgres", f"CREATE ROLE sweeper LOGIN PASSWORD '{SECRET}'")
    postgres.sql(port, "postgres", "CREATE DATABASE secret OWNER sweeper")
    url = f"postgresql+psycopg://sweeper:{SECRET}@127.0.0.1:{port}/secret"
    env = {k: v for k, v in os.environ.items() if k != "PGPASSWORD"}
    env.update(PYTHONPATH=os.pathsep.join([str(REPO / "tests"), str(REPO)]), PYTHONWARNINGS="ignore")
    sweep = tmp_path / "sweep"
    r = subprocess.run([sys.executable, "-m", "attnexp", "train", "-m", "hparams_search=optuna", f"hydra.sweeper.storage={url}",
                        "hydra.sweeper.study_name=secret", "hydra.sweeper.n_trials=2", *WORKER, f"hydra.sweep.dir={sweep}"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, r.stderr[-3000:]
    assert not secret_hits(r.stdout + r.stderr)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) >= 15 and (sweep / "optuna_results.json").is_file() and list(sweep.rglob(".hydra/hydra.yaml"))
    leaked = [str(p) for p in files if secret_hits(p.read_bytes().decode("utf-8", "replace"))]
    assert not leaked, leaked
    assert f"sweeper@127.0.0.1:{port}/secret" in (sweep / "optuna_results.json").read_text()

    shown = subprocess.run([sys.executable, "-m", "attnexp", "compare", "study=secret", f"storage={url}"], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and not secret_hits(shown.stdout + shown.stderr), shown.stderr[-2000:]
    assert shown.stdout.count("trial") >= 2, shown.stdout
    down = url.replace(f":{port}/", f":{postgres.free_port()}/")
    shown = subprocess.run([sys.executable, "-m", "attnexp", "compare", "study=secret", f"storage={down}"], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 2 and shown.stderr.count("\n") == 1 and not secret_hits(shown.stderr), shown.stderr


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


OPEN_AT_ONCE = """
import sys, time
import optuna
from attnexp.config.study import StudyStorage
from hydra_plugins.attnexp_optuna_sweeper._study_storage import schema_lock
url, name, at, locked = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4] == "1"
optuna.logging.set_verbosity(optuna.logging.ERROR)
time.sleep(max(0.0, at - time.time()))
if locked:
    with schema_lock(StudyStorage.parse(url)):
        optuna.create_study(study_name=name, storage=optuna.storages.RDBStorage(url), load_if_exists=True)
else:
    optuna.create_study(study_name=name, storage=optuna.storages.RDBStorage(url), load_if_exists=True)
"""


def open_at_once(port: int, url: str, database: str, locked: bool, n: int = 4) -> list[subprocess.CompletedProcess]:
    postgres.sql(port, "postgres", f"CREATE DATABASE {database}")
    url = url.rsplit("/", 1)[0] + "/" + database
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), str(REPO)]), "PYTHONWARNINGS": "ignore"}
    at = time.time() + 8  # every process imported and waiting: they open the empty database together
    procs = [subprocess.Popen([sys.executable, "-c", OPEN_AT_ONCE, url, "s", str(at), "1" if locked else "0"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(n)]
    return [subprocess.CompletedProcess(p.args, p.wait(timeout=120), *p.communicate()) for p in procs]


def test_launches_opening_an_empty_database_at_once_all_open_the_study(pg):
    """Before: three workers started together on a fresh PostgreSQL database each had Optuna create its
    tables and all but one stopped on the same CREATE TABLE (UniqueViolation on pg_type, seen in the
    three-workers test). The sweeper opens the study under an advisory lock; without it (the control
    here) the same start fails."""
    port, url = pg
    done = open_at_once(port, url, "together", locked=True)
    assert all(r.returncode == 0 for r in done), [r.stderr[-800:] for r in done if r.returncode]
    for attempt in range(3):  # a race: on a loaded machine one start may miss it (CI, 2026-11-28), three rarely do
        control = open_at_once(port, url, f"unlocked{attempt}", locked=False, n=6)
        if any("UniqueViolation" in r.stderr or "already exists" in r.stderr for r in control):
            break
    else:
        raise AssertionError("three times the control opened an empty database at once without the lock and nothing "
                             "failed: the test shows nothing")
