"""Study passwords, study names and `compare study=` (issue 49). Before: a password given as
docs/sweeps.md showed it was printed in every launch's first line and written into
optuna_results.json and every job's .hydra/; a password holding "@" was half shown; `compare study=`
added Optuna's tables to MLflow's database and created a missing study file; a study name was a path
(`../../../escaped` put the study three folders above the sweep)."""

from __future__ import annotations

import hashlib
import os
import sqlite3

import pytest

from attnexp.config.secrets import hide_password, take_passwords, without_password

PASSWORDS = ["plain", "p@ss", "a:b", "s/l/a/s/h", "per%40cent", "all@:/?#%x"]


@pytest.mark.parametrize("password", PASSWORDS)
def test_any_password_is_hidden_and_taken_out_whole(password, monkeypatch):
    monkeypatch.delenv("PGPASSWORD", raising=False)
    url = f"postgresql+psycopg://me:{password}@db.example:5432/optuna"
    assert hide_password(f"cannot use {url}: refused") == "cannot use postgresql+psycopg://me:***@db.example:5432/optuna: refused"
    clean, taken = without_password(f"hydra.sweeper.storage={url}")
    assert clean == "hydra.sweeper.storage=postgresql+psycopg://me@db.example:5432/optuna"
    assert taken == password.replace("%40", "@")  # %-escapes decoded, as libpq wants the password
    args, problem = take_passwords(["-m", f"hydra.sweeper.storage={url}", "seed=0,1"])
    assert problem is None and args == ["-m", clean, "seed=0,1"] and os.environ["PGPASSWORD"] == taken


def test_urls_without_a_password_and_other_text_are_left_alone():
    for text in ["sqlite:///multirun/optuna/x.db", "journal:/shared/a:b@c.log", "hydra.searchpath=[file:///a:b@c]",
                 "postgresql+psycopg://me@db/optuna", "data.corpus=a:b@c", "tags=[x@y]"]:
        assert hide_password(text) == text and without_password(text) == (text, None)


def test_a_password_libpq_cannot_take_is_refused_in_one_line_and_not_shown():
    args = ["+logger.tracking_uri=https://me:t0ken@mlflow.example"]
    kept, problem = take_passwords(args)
    assert kept == args and "t0ken" not in problem and "\n" not in problem and "PGPASSWORD" in problem


def test_a_password_on_the_command_line_is_never_echoed_by_a_config_error(capsys):
    from attnexp.cli import main

    assert main(["train", "-m", "hparams_search=optuna", "hydra.sweeper.storage=postgresql+psycopg://u:Zq9@x/y",
                 "model.n_layers=(oops"]) == 2
    err = capsys.readouterr().err
    assert "Zq9" not in err and err.count("\n") == 1, err


@pytest.mark.parametrize("name", ["../../../escaped", "a/b", "odd?x=1", "h#sh", "nul\0l", "..", ".hidden"])
def test_a_study_name_that_is_not_a_name_is_one_line(name, tmp_path, monkeypatch):
    from attnexp.launch.command_line import precheck

    pytest.importorskip("optuna")
    monkeypatch.chdir(tmp_path)
    problem = precheck(["hparams_search=optuna", f"hydra.sweeper.study_name='{name}'"], multirun=True)
    assert problem and problem.startswith("hydra.sweeper.study_name=") and "not a study name" in problem, problem
    assert not any(tmp_path.rglob("*"))  # no study file made anywhere


def digest(folder) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def compare(*args: str) -> tuple[int, str]:
    import contextlib
    import io

    from attnexp.cli.compare import compare_cli

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = compare_cli(list(args))
    return code, err.getvalue()


def test_compare_study_opens_a_study_read_only_and_creates_nothing(tmp_path):
    optuna = pytest.importorskip("optuna")
    run = tmp_path / "runs" / "r0"
    run.mkdir(parents=True)
    (run / "summary.json").write_text('{"status": "completed", "run": "r0", "metrics": {"val/loss": 1.0}}\n')
    db = tmp_path / "study.db"
    study = optuna.create_study(study_name="s", storage=f"sqlite:///{db}")
    trial = study.ask()
    trial.set_user_attr("run_dir", str(run))
    study.tell(trial, 1.0)
    journal = tmp_path / "study.log"
    j = optuna.create_study(study_name="s", storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(journal))))
    trial = j.ask()
    trial.set_user_attr("run_dir", str(run))
    j.tell(trial, 1.0)
    mlflow = tmp_path / "mlflow.db"
    with sqlite3.connect(mlflow) as c:
        c.execute("CREATE TABLE experiments (experiment_id INTEGER PRIMARY KEY)")
    before = digest(tmp_path)

    assert compare("study=s", f"storage=sqlite:///{db}")[0] == 0
    assert compare("study=s", f"storage=journal:{journal}")[0] == 0
    code, err = compare("study=s", f"storage=sqlite:///{mlflow}")
    assert code == 2 and "another tool's database" in err and err.count("\n") == 1, err
    for missing in (f"sqlite:///{tmp_path / 'none.db'}", f"journal:{tmp_path / 'none.log'}"):
        code, err = compare("study=s", f"storage={missing}")
        assert code == 2 and "is not there" in err and err.count("\n") == 1, err
    assert digest(tmp_path) == before  # every file byte-identical, nothing created (no lock, no table, no file)


def test_a_damaged_or_foreign_journal_is_one_line_and_left_as_it_was(tmp_path, monkeypatch):
    """Issue 52. Before: a journal file cut short, garbage or another tool's gave a traceback of up to 70
    frames from Optuna's journal reader once the sweep had started."""
    optuna = pytest.importorskip("optuna")
    from attnexp.launch.command_line import precheck

    monkeypatch.chdir(tmp_path)
    good = tmp_path / "good.log"
    study = optuna.create_study(study_name="j", storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(good))))
    study.tell(study.ask(), 1.0)
    text = good.read_bytes()
    cases = {"garbage.log": b"garbage\nmore\n", "other.log": b'{"op_code": 99}\n{"op_code": 98}\n',
             "cut.log": text[: len(text) // 2] + b"\n" + text[len(text) // 2:]}  # a line broken in the middle
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        problem = precheck(["hparams_search=optuna", f"hydra.sweeper.storage=journal:{tmp_path / name}"], multirun=True)
        assert problem and "is not a whole Optuna journal" in problem and "\n" not in problem, (name, problem)
        assert (tmp_path / name).read_bytes() == data
    assert precheck(["hparams_search=optuna", f"hydra.sweeper.storage=journal:{good}"], multirun=True) is None
    assert good.read_bytes() == text
