"""lightning-hydra-template's tests/test_sweeps.py, rewritten as attnexp commands: each test names
the one it mirrors (ashleve/lightning-hydra-template, tests/test_sweeps.py). LHT only checks that
the command exits 0; these also read every job's summary.json.

Where LHT's command has no attnexp equivalent it is said beside it: `trainer=ddp_sim` (LHT's
ddp_spawn on CPU) is `trainer=ddp trainer.accelerator=cpu trainer.devices=2` (attnexp refuses
ddp_spawn: its children keep the run's record to themselves), `model.optimizer.lr` is `optim.lr`,
`logger=[]` is `logger=none`, `hparams_search=mnist_optuna` is `hparams_search=optuna`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.runs import REPO

DDP_SIM = ["trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2"]
SMALL = ["data.n_sentences=600", "model.d_model=32", "maps.n_examples=2", "logger=none"]


def sweep(*args: str, cwd: Path = REPO, env: dict | None = None) -> subprocess.CompletedProcess:
    """`python -m attnexp train -m ARGS` from the repo root (the presets' ../shared paths resolve there)."""
    r = subprocess.run([sys.executable, "-m", "attnexp", "train", "-m", *args], cwd=cwd, capture_output=True, text=True,
                       timeout=900, env={**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})})
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def jobs(root: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(root.rglob("summary.json"))]


@pytest.mark.slow
def test_experiments(tmp_path):
    """Mirrors test_experiments: `-m experiment=glob(*) ++trainer.fast_dev_run=true`. Before, any
    glob() failed with "config error: ConfigLoader is not set". The 20 Newsgroups presets are left
    out by glob's own exclude: newsgroups_bert needs bert-base-uncased from the hub, and the other two
    read all 18,846 posts (a tokenizer trained or applied: minutes on 2 cores; their own tests use a
    slice)."""
    sweep("experiment=glob(*,exclude=newsgroups*)", f"hydra.sweep.dir={tmp_path}", "++trainer.fast_dev_run=true",
          "logger=none")
    done = jobs(tmp_path)
    assert sorted(d["choices"]["experiment"] for d in done) == sorted(
        p.stem for p in (REPO / "conf" / "experiment").glob("*.yaml") if not p.stem.startswith("newsgroups"))
    assert all(d["status"] == "completed" for d in done)


@pytest.mark.slow
def test_hydra_sweep(tmp_path):
    """Mirrors test_hydra_sweep: `-m model.optimizer.lr=0.005,0.01 ++trainer.fast_dev_run=true`."""
    sweep(f"hydra.sweep.dir={tmp_path}", "optim.lr=0.005,0.01", "++trainer.fast_dev_run=true", *SMALL)
    done = jobs(tmp_path)
    assert sorted(d["overrides"][0] for d in done) == ["optim.lr=0.005", "optim.lr=0.01"]
    assert all(d["status"] == "completed" for d in done)


@pytest.mark.slow
def test_hydra_sweep_ddp_sim(tmp_path):
    """Mirrors test_hydra_sweep_ddp_sim: `trainer=ddp_sim trainer.max_epochs=3 +trainer.limit_train_batches=0.01
    +trainer.limit_val_batches=0.1 +trainer.limit_test_batches=0.1 model.optimizer.lr=0.005,0.01,0.02`.
    Before, Lightning restarted rank 1 with `-m ...`, attnexp answered "unknown command '-m'" and
    Lightning SIGKILLed the sweep; and a test-batch share below one batch a rank ended a trained run as
    config_error. (The train and validation limits are counts here: a share of the toy data's one
    validation batch a rank is less than a batch, which Lightning refuses before training.)"""
    sweep(f"hydra.sweep.dir={tmp_path}", *DDP_SIM, "trainer.max_epochs=3", "trainer.limit_train_batches=2",
          "trainer.limit_val_batches=1", "+trainer.limit_test_batches=0.1", "optim.lr=0.005,0.01,0.02", *SMALL)
    done = jobs(tmp_path)
    assert len(done) == 3 and all(d["status"] == "completed" and d["epochs"] == 3 and d["steps"] == 6 for d in done)
    assert all("limit_test_batches" in d["test_skipped"] for d in done)  # said, and the training kept
    assert all(len(list(Path(d["run_dir"]).glob("train_ddp_process_1.log"))) == 1 for d in done)  # rank 1 in its job


@pytest.mark.slow
def test_optuna_sweep(tmp_path):
    """Mirrors test_optuna_sweep: `hparams_search=mnist_optuna hydra.sweeper.n_trials=10
    hydra.sweeper.sampler.n_startup_trials=5 ++trainer.fast_dev_run=true`. Before, every job said
    completed while 0 of 10 trials were complete in the study (fast_dev_run keeps no best checkpoint):
    now a trial is told its one validation's value."""
    import optuna

    db = tmp_path / "study.db"
    sweep("hparams_search=optuna", f"hydra.sweep.dir={tmp_path}", "hydra.sweeper.n_trials=10",
          "hydra.sweeper.n_startup_trials=5", f"hydra.sweeper.storage=sqlite:///{db}", "++trainer.fast_dev_run=true",
          *SMALL)
    study = optuna.load_study(study_name="mha-toy-lm", storage=f"sqlite:///{db}")
    assert len(study.trials) == 10 and all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)
    assert sorted(t.value for t in study.trials) == sorted(d["metrics"]["final"]["val/loss"] for d in jobs(tmp_path))


@pytest.mark.slow
def test_optuna_sweep_ddp_sim(tmp_path):
    """Mirrors test_optuna_sweep_ddp_sim_wandb without wandb (the next test adds it):
    `hparams_search=mnist_optuna hydra.sweeper.n_trials=5 trainer=ddp_sim trainer.max_epochs=3 ...`
    (3 trials here: each starts two processes on 2 cores)."""
    import optuna

    db = tmp_path / "study.db"
    sweep("hparams_search=optuna", f"hydra.sweep.dir={tmp_path}", "hydra.sweeper.n_trials=3", *DDP_SIM,
          f"hydra.sweeper.storage=sqlite:///{db}", "trainer.max_epochs=2", "trainer.limit_train_batches=2", *SMALL)
    study = optuna.load_study(study_name="mha-toy-lm", storage=f"sqlite:///{db}")
    states = {t.state for t in study.trials}
    assert len(study.trials) == 3 and states <= {optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED}
    assert all(d["status"] in ("completed", "pruned") for d in jobs(tmp_path))


@pytest.mark.slow
def test_wandb_optuna_sweep(tmp_path):
    """Mirrors test_optuna_sweep_ddp_sim_wandb: the same with `logger=wandb` (offline here): one
    wandb run per trial, each finished."""
    from helpers import wandb_log

    sweep("hparams_search=optuna", f"hydra.sweep.dir={tmp_path}", "hydra.sweeper.n_trials=2", *DDP_SIM,
          f"hydra.sweeper.storage=sqlite:///{tmp_path / 'study.db'}", "trainer.max_epochs=2",
          "trainer.limit_train_batches=2", *SMALL, "logger=wandb", cwd=tmp_path,
          env={"WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_DIR": str(tmp_path)})
    logs = sorted(tmp_path.rglob("run-*.wandb"))
    assert len(logs) == 2 and all(wandb_log.summary(p)["exit_code"] == 0 for p in logs)


@pytest.mark.slow
def test_a_failing_ddp_job_does_not_take_the_sweep_with_it(tmp_path):
    """A DDP job that fails (here: Lightning refuses half of one validation batch a rank) used to let
    Lightning's child-process watcher SIGKILL the sweep itself when the job's rank 1 exited non-zero:
    the next job was left hanging. Now the failed job is recorded and the next one runs."""
    r = subprocess.run([sys.executable, "-m", "attnexp", "train", "-m", f"hydra.sweep.dir={tmp_path}", *DDP_SIM,
                        "trainer.max_epochs=1", "trainer.limit_train_batches=2", "trainer.limit_val_batches=0.5,1",
                        *SMALL], cwd=REPO, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert r.returncode == 1, r.stderr[-3000:]
    done = {next(o for o in d["overrides"] if o.startswith("trainer.limit_val")): d["status"] for d in jobs(tmp_path)}
    assert done == {"trainer.limit_val_batches=0.5": "config_error", "trainer.limit_val_batches=1": "completed"}, done
    assert "1 run(s) of the sweep failed" in r.stderr


@pytest.mark.slow
def test_a_ddp_sweep_that_a_config_makes_runs_each_job_once(tmp_path):
    """A sweep set by the config (hydra.mode=MULTIRUN in an experiment, no -m) with DDP jobs: Lightning
    starts each job's rank 1 on that job's overrides, which compose hydra.mode=MULTIRUN again; the
    command line planned the child as a sweep of its own (-m), so rank 1 swept instead of joining its
    job. The child is told it is one run (hydra.mode=RUN)."""
    (tmp_path / "myconf" / "experiment").mkdir(parents=True)
    (tmp_path / "myconf" / "experiment" / "seeds.yaml").write_text(
        "# @package _global_\nhydra:\n  mode: MULTIRUN\n  sweeper:\n    params:\n      seed: 1,2\n")
    r = subprocess.run([sys.executable, "-m", "attnexp", "train", "--config-dir", "myconf", "experiment=seeds",
                        f"hydra.sweep.dir={tmp_path / 'sweep'}", *DDP_SIM, "trainer.max_epochs=1",
                        "trainer.limit_train_batches=2", "trainer.limit_val_batches=1", "test=false", *SMALL],
                       cwd=tmp_path, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert r.returncode == 0, r.stderr[-3000:]
    done = jobs(tmp_path)
    assert sorted(d["seed"] for d in done) == [1, 2] and all(d["status"] == "completed" for d in done), done
    assert all(len(list(Path(d["run_dir"]).glob("train_ddp_process_1.log"))) == 1 for d in done)  # rank 1 in its job
