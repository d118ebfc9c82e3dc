"""Sweeps: a grid over variants x seeds aggregated into a report, Optuna studies that follow the
monitored metric and resume from SQLite, one wandb run per job in one group, DDP on CPU, jobs in
parallel processes (submitit), and the debug presets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from attnexp.cli import main
from attnexp.results.compare import Table, group_rows
from helpers import browser
from helpers.runs import options

TINY = ["trainer.max_epochs=2", "data.n_sentences=300", "logger=none", "model.d_model=32", "test=false",
        "maps.n_examples=2"]


def fake(seed: int, variant: str, loss: float, status: str = "completed") -> tuple[Path, dict]:
    return Path(f"/runs/{variant}-{seed}/summary.json"), {
        "status": status, "overrides": [f"attention={variant}", f"seed={seed}"],
        "metrics": {"best": {"monitor": "val/loss", "value": loss}, "test": {"test/acc": 1 - loss / 10}, "history": []},
        "train_time_s": 10.0, "tokens_per_s": 1000.0 + seed, "peak_memory": {"cpu_max_rss_mb": 500}}


def test_groups_of_seeds_get_mean_std_interval_and_welch():
    from scipy import stats

    a, b, c = [2.0, 2.1, 2.2], [2.05, 2.15, 2.25], [3.0, 3.1, 2.9]
    runs = [fake(i, "alibi", x) for i, x in enumerate(a)] + [fake(i, "causal", x) for i, x in enumerate(b)]
    runs += [fake(i, "linear", x) for i, x in enumerate(c)] + [fake(3, "linear", float("nan"), "diverged")]
    cols, rows = group_rows(Table(runs))
    assert [r["attention"] for r in rows] == ["alibi", "causal", "linear"]  # lowest val/loss first
    best, near, far = rows
    assert best["val/loss"] == f"{np.mean(a):.4f} ± {np.std(a, ddof=1):.4f} (3) ★" and best["vs best (val/loss)"] == "best"
    lo, hi = stats.t.interval(0.95, 2, loc=np.mean(a), scale=stats.sem(a))
    assert best["95% interval"] == f"[{lo:.4f}, {hi:.4f}]"
    p = stats.ttest_ind(b, a, equal_var=False).pvalue
    assert near["vs best (val/loss)"] == f"p={p:.3f} ~" and p > 0.05  # within noise
    assert far["vs best (val/loss)"].startswith("p=") and "~" not in far["vs best (val/loss)"]
    assert far["runs"] == "3 completed, 1 diverged"  # the diverged seed is counted, not dropped


def test_a_sweep_of_variants_and_seeds_becomes_a_report(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["train", "-m", "attention=causal,alibi", "seed=0,1", *TINY]) == 0
    sweep = next((tmp_path / "multirun").glob("*/*"))
    jobs = sorted(p.name for p in sweep.iterdir() if (p / ".hydra").is_dir())
    assert jobs == ["0_attention=causal,seed=0", "1_attention=causal,seed=1", "2_attention=alibi,seed=0",
                    "3_attention=alibi,seed=1"], jobs  # folders named by the swept keys only
    results = (sweep / "results.md").read_text()
    assert "| attention | runs" in results and "2 completed" in results and (sweep / "results.csv").is_file()
    capsys.readouterr()
    report = tmp_path / "report.html"
    assert main(["compare", str(sweep), f"report={report}", f"csv={tmp_path / 'groups.csv'}"]) == 0
    out = capsys.readouterr().out
    assert "2 groups of seeds" in out and "★" in out
    page = report.read_text()
    assert page.count("<svg") == 3 and "Groups of seeds" in page and page.count('>viewer</a>') == 4  # 4 viewer links
    assert not [m for m in ('src="http', 'href="http', "url(http", "<script") if m in page]  # self-contained: no network
    if browser.CHROMIUM is None:
        pytest.skip("needs Debian's chromium to open the report")
    profile = tmp_path / "chromium"
    dom = browser.open_page(report.as_uri(), "--dump-dom", profile, size="1200,2400", wait_ms=5000)
    assert dom.count("<svg") == 3 and dom.count("<tr") >= 1 + 2 + 1 + 4, dom[:500]  # group table, run table
    shot = tmp_path / "report.png"
    browser.open_page(report.as_uri(), f"--screenshot={shot}", profile, size="1200,2400", wait_ms=5000)
    from PIL import Image

    px = np.asarray(Image.open(shot).convert("RGB")).reshape(-1, 3)
    coloured = ((px.max(1) - px.min(1)) > 60).sum()  # the plots' lines and bands
    assert coloured > 5000, coloured


def study_rows(db: Path) -> list:
    import optuna

    return optuna.load_study(study_name="t", storage=f"sqlite:///{db}").trials


def test_optuna_maximizes_accuracy_and_resumes_from_sqlite(tmp_path, monkeypatch):
    import optuna

    monkeypatch.chdir(tmp_path)
    common = ["-m", "hparams_search=optuna", "hydra.sweeper.study_name=t", f"hydra.sweeper.storage=sqlite:///{tmp_path}/t.db",
              "checkpoint.monitor=val/acc", "hydra.sweeper.pruner=none", *TINY, "trainer.max_epochs=1"]
    assert main(["train", *common, "hydra.sweeper.n_trials=3"]) == 0
    study = optuna.load_study(study_name="t", storage=f"sqlite:///{tmp_path}/t.db")
    assert study.direction == optuna.study.StudyDirection.MAXIMIZE  # accuracy: higher is better
    values = [t.value for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(values) == 3 and study.best_value == max(values)
    accs = [json.loads(p.read_text())["metrics"]["best"]["value"] for p in (tmp_path / "multirun").rglob("summary.json")]
    assert sorted(accs) == sorted(values)  # the values told are the runs' own
    assert set(study.best_params) == {"optim.lr", "optim.warmup_steps", "model.dropout", "model.d_model"}
    # each trial leads back to its run folder (optuna-dashboard shows user attributes)
    assert all((Path(t.user_attrs["run_dir"]) / "summary.json").is_file() for t in study.trials)
    # the same command with more trials continues the study from its SQLite file
    assert main(["train", *common, "hydra.sweeper.n_trials=4"]) == 0
    assert len(optuna.load_study(study_name="t", storage=f"sqlite:///{tmp_path}/t.db").trials) == 4
    results = json.loads(next((tmp_path / "multirun").rglob("optuna_results.json")).read_text())
    assert results["direction"] == "maximize" and results["complete"] >= 3


def test_a_trial_the_pruner_stops_is_recorded_as_pruned(tmp_path):
    import optuna

    from attnexp.api import train
    from attnexp.config import TrialRef
    from attnexp.training.guards import OptunaPruning
    from helpers.runs import run_of

    storage = f"sqlite:///{tmp_path / 'study.db'}"
    study = optuna.create_study(study_name="s", storage=storage)
    for _ in range(3):  # finished trials far better than any first epoch of this run
        done = study.ask()
        done.report(0.01, step=0)
        study.tell(done, 0.01)
    trial = study.ask()  # the job opens this one from the storage, as a job in another process would
    ref = TrialRef(storage, "s", trial.number, "median", n_startup_trials=0, n_warmup_steps=0)
    s = train(run_of(TINY, tmp_path / "run"), callbacks=[OptunaPruning(ref, "val/loss")])
    assert s["status"] == "pruned" and "pruned by Optuna after epoch 0" in s["error"]
    assert optuna.load_study(study_name="s", storage=storage).trials[trial.number].intermediate_values.keys() == {0}


def test_a_wandb_sweep_makes_one_finished_run_per_job_in_one_group(tmp_path, monkeypatch):
    from helpers import wandb_log

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    assert main(["train", "-m", "attention=causal,alibi", *TINY, "logger=wandb"]) == 0
    logs = sorted((tmp_path / "multirun").rglob("run-*.wandb"))
    assert len(logs) == 2
    runs = [wandb_log.summary(p) for p in logs]
    sweep = next((tmp_path / "multirun").glob("*/*"))
    assert {r["group"] for r in runs} == {f"{sweep.parent.name}/{sweep.name}"}
    assert all(r["exit_code"] == 0 and r["job_type"] == "attention" for r in runs)
    assert sorted(t for r in runs for t in r["tags"] if t.startswith("attention=")) == ["attention=alibi", "attention=causal"]
    assert sorted(r["config"]["attention"]["name"] for r in runs) == ["alibi", "mha"]  # each its own config
    assert all("val/loss" in r["history"] for r in runs)
    # each run named after its job folder, as in TensorBoard and MLflow (before: no display name; wandb's random one)
    assert sorted(r["name"] for r in runs) == sorted(p.parent.parent.parent.name for p in logs), [r["name"] for r in runs]


def test_the_wandb_sweep_definition_drives_the_cli():
    import yaml

    spec = yaml.safe_load((REPO / "scripts" / "wandb_sweep.yaml").read_text())
    assert spec["command"][:4] == ["${env}", "python", "-m", "attnexp"] and "${args_no_hyphens}" in spec["command"]
    assert spec["metric"]["name"] == "val/loss" and spec["metric"]["goal"] == "minimize"
    # the overrides an agent would pass are valid attnexp overrides
    from attnexp.launch.command_line import precheck

    params = {k: (v["values"][0] if "values" in v else v.get("min")) for k, v in spec["parameters"].items()}
    assert precheck([f"{k}={v}" for k, v in params.items()] + ["trainer.max_epochs=1"], multirun=False) is None


@pytest.mark.parametrize("preset", options("debug"))
def test_debug_presets_run(preset, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    extra = {"overfit": ["trainer.max_epochs=2", "data.n_sentences=300"]}.get(preset, ["data.n_sentences=300"])
    assert main(["train", f"debug={preset}", *extra, f"hydra.run.dir={tmp_path / 'run'}"]) == 0
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["status"] == "completed"


from helpers.runs import REPO  # noqa: E402


def cli(args: list[str], cwd: Path, timeout: int = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})}
    return subprocess.run([sys.executable, "-m", "attnexp", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.slow
def test_submitit_local_runs_two_jobs_side_by_side(tmp_path):
    r = cli(["train", "-m", "hydra/launcher=local_parallel", "seed=0,1", *TINY], tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    sweep = next((tmp_path / "multirun").glob("*/*"))
    summaries = [json.loads(p.read_text()) for p in sweep.glob("*/summary.json")]
    assert sorted(s["seed"] for s in summaries) == [0, 1] and {s["status"] for s in summaries} == {"completed"}
    assert len({s["pid"] for s in summaries}) == 2  # each in its own process
    assert all(s["device"].endswith(f"{max(1, (os.cpu_count() or 2) // 2)} threads)") for s in summaries), summaries
    assert (sweep / "results.md").is_file()


def test_a_sweep_with_a_diverging_job_lists_it_and_exits_1(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = main(["train", "-m", "optim.lr=1e-3,1e4", *TINY, "maps.enabled=false"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1, err[-5:]
    assert err[-2] == "attnexp: 1 run(s) of the sweep failed (see their summary.json):", err[-5:]
    assert err[-1].startswith("  1_optim.lr=10000.0: diverged: the training loss stopped being a number"), err[-1]


def test_a_sweep_whose_values_hold_a_slash_keeps_every_job_inside_it(tmp_path, monkeypatch, capsys):
    """A value with a '/' is written %2F in the job's folder name (0_data.corpus=no%2Fa.txt): every job
    stays one folder inside the sweep, and one where every job failed does not exit 0. Before, a '/'
    nested the folder and `a/../../../../escaped_dir/x.txt` put that job's folder outside the sweep,
    where results.md and the failure list left it out."""
    monkeypatch.chdir(tmp_path)
    escaping = "a/../../../../escaped_dir/x.txt"
    assert main(["train", "-m", f"data.corpus={escaping},no/b.txt", *TINY]) == 1
    err = capsys.readouterr().err
    assert "2 run(s) of the sweep failed" in err and f"config_error: data.corpus='{escaping}': no such file" in err, err
    sweep = next((tmp_path / "multirun").glob("*/*/"))
    assert sorted(p.name for p in sweep.iterdir() if p.is_dir()) == [
        "0_data.corpus=a%2F..%2F..%2F..%2F..%2Fescaped_dir%2Fx.txt", "1_data.corpus=no%2Fb.txt"]
    assert not list(tmp_path.rglob("escaped_dir")) and "escaped_dir" in (sweep / "results.md").read_text()


@pytest.mark.slow
def test_two_launches_on_one_optuna_study_both_finish_and_lose_nothing(tmp_path):
    """Before: the second launch marked the first's RUNNING trial FAIL ("belongs to a launch that was
    killed"), the first's job then failed on its next report (UpdateFinishedTrialError) and its
    sweeper died with `Cannot tell a FAIL trial`. Now live trials carry heartbeats."""
    import time

    import optuna

    db = tmp_path / "t.db"
    args = [sys.executable, "-m", "attnexp", "train", "-m", "hparams_search=optuna", "hydra.sweeper.study_name=t",
            f"hydra.sweeper.storage=sqlite:///{db}", "hydra.sweeper.n_trials=4", "hydra.sweeper.pruner=median",
            "hydra.sweeper.n_startup_trials=0",
            *TINY, "trainer.max_epochs=3", "data.n_sentences=600", "threads=1"]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    first = subprocess.Popen([*args, f"hydra.sweep.dir={tmp_path / 'a'}"], cwd=tmp_path, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    end = time.time() + 120
    while time.time() < end:  # the first launch's first trial is running
        try:
            if optuna.load_study(study_name="t", storage=f"sqlite:///{db}").get_trials(
                    states=(optuna.trial.TrialState.RUNNING,)):
                break
        except Exception:  # noqa: BLE001 - no study yet
            pass
        time.sleep(0.2)
    second = subprocess.run([*args, f"hydra.sweep.dir={tmp_path / 'b'}"], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=600)
    out, err = first.communicate(timeout=600)
    assert first.returncode == 0, err[-3000:]
    assert second.returncode == 0, second.stderr[-3000:]
    study = optuna.load_study(study_name="t", storage=f"sqlite:///{db}")
    # a trial both launches asked for at once past n_trials is told FAIL at once, marked `surplus`, and
    # never run (CI saw one: 1 complete, 3 pruned and a FAIL, which the test had taken for a lost trial)
    ran = [t for t in study.trials if not t.user_attrs.get("surplus")]
    surplus = [t for t in study.trials if t.user_attrs.get("surplus")]
    assert len(ran) == 4 and all(t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
                                 for t in ran), [(t.number, t.state, t.user_attrs) for t in study.trials]
    assert all(t.state == optuna.trial.TrialState.FAIL and "run_dir" not in t.user_attrs for t in surplus)
    runs = [json.loads(p.read_text()) for p in tmp_path.rglob("summary.json")]
    assert len(runs) == len(ran) and all(r["status"] in ("completed", "pruned") for r in runs)
    assert "UpdateFinishedTrialError" not in err + second.stderr


def test_an_optuna_sweep_that_cannot_start_is_one_line(tmp_path, monkeypatch):
    """Before: without Optuna, a 13-line Hydra traceback; a truncated or non-SQLite study file, a
    traceback from SQLAlchemy once the sweep had started."""
    from attnexp.launch.command_line import precheck

    monkeypatch.chdir(tmp_path)
    bad = tmp_path / "text.db"
    bad.write_text("not a database\n")
    assert precheck(["hparams_search=optuna", f"hydra.sweeper.storage=sqlite:///{bad}"], multirun=True) == (
        f"hydra.sweeper.storage: {bad} is not an SQLite database; give a new file name, or move it away to start "
        f"the study afresh")
    import optuna

    good = tmp_path / "good.db"
    optuna.create_study(study_name="x", storage=f"sqlite:///{good}").ask()
    cut = tmp_path / "cut.db"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    problem = precheck(["hparams_search=optuna", f"hydra.sweeper.storage=sqlite:///{cut}"], multirun=True)
    assert problem and f"{cut} is a damaged SQLite database" in problem and "\n" not in problem, problem
    assert precheck(["hparams_search=optuna", f"hydra.sweeper.storage=sqlite:///{good}"], multirun=True) is None

    # Before: another tool's SQLite database (here MLflow's tables) got Optuna's tables added, then a
    # traceback; a folder given as the study file, an IsADirectoryError traceback.
    import sqlite3

    foreign = tmp_path / "mlflow.db"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE experiments (experiment_id INTEGER PRIMARY KEY, name TEXT)")
        db.execute("CREATE TABLE runs (run_uuid TEXT PRIMARY KEY)")
    before = foreign.read_bytes()
    assert precheck(["hparams_search=optuna", f"hydra.sweeper.storage=sqlite:///{foreign}"], multirun=True) == (
        f"hydra.sweeper.storage: {foreign} is another tool's database (it holds tables experiments, runs, which no "
        f"Optuna study has); give a new file name, or move it away to start the study afresh")
    assert foreign.read_bytes() == before
    (tmp_path / "adir").mkdir()
    assert precheck(["hparams_search=optuna", f"hydra.sweeper.storage=sqlite:///{tmp_path / 'adir'}"], multirun=True) == (
        f"hydra.sweeper.storage: {tmp_path / 'adir'} is a folder; give a file for the study, e.g. "
        f"hydra.sweeper.storage=sqlite:///{tmp_path / 'adir'}/study.db")
    monkeypatch.setitem(sys.modules, "optuna", None)  # as if it were not installed
    assert precheck(["hparams_search=optuna"], multirun=True) == (  # the installed wheel's command first (issue 50)
        "hparams_search=optuna needs Optuna: pip install 'attnexp[sweep]' (from a checkout: pip install -e '.[sweep]')")


def test_glob_sweeps_and_ddp_spawn_are_checked_before_anything_runs():
    """Before: any glob() failed with "config error: ConfigLoader is not set"; ddp_spawn trained and
    recorded a `completed` run of 0 epochs."""
    from attnexp.launch.command_line import precheck, sweep_jobs

    jobs = sweep_jobs(["experiment=glob(*,exclude=newsgroups*)", "seed=0,1"])
    assert len(jobs) == 2 * len([p for p in (REPO / "conf" / "experiment").glob("*.yaml")
                                 if not p.stem.startswith("newsgroups")])
    assert precheck(["trainer.strategy=ddp_spawn", "trainer.accelerator=cpu", "trainer.devices=2"], multirun=False) == (
        "trainer.strategy=ddp_spawn trains in child processes that keep the run's record to themselves; use trainer=ddp "
        "(the same data-parallel training) on GPUs, or trainer=ddp_sim (2 CPU processes)")
