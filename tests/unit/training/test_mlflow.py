"""logger=mlflow: Lightning's MLFlowLogger into a local SQLite store under paths.log_dir, read back
through MLflow's own client as a user's `mlflow ui` would show it (tests/e2e/test_dashboards.py
runs it against a real `mlflow server`)."""

from __future__ import annotations

import os

import pytest

from attnexp.api import train
from attnexp.config import ConfigError
from helpers.runs import run_of

mlflow = pytest.importorskip("mlflow", reason="pip install 'attnexp[mlflow]'")
QUICK = ["trainer.enable_progress_bar=false", "data.n_sentences=400", "trainer.max_epochs=2", "maps.n_examples=2",
         "maps.animation=true"]


def test_an_mlflow_run_holds_metrics_the_config_tags_maps_and_the_viewer(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    run = run_of([*QUICK, "logger=mlflow", f"paths.log_dir={tmp_path / 'runs'}", "tags=[first_look]"], tmp_path / "run")
    s = train(run)
    # mlflow.set_tracking_uri wrote the variable the logger's yaml reads: the next run of this process (a
    # sweep's next job) took this run's store for the user's own (issue 50's review)
    assert "MLFLOW_TRACKING_URI" not in os.environ
    # issue 50: the address that opens the runs table (MLflow 3.17 opens experiments on its GenAI view)
    link = next(d for d in s["dashboards"] if "workflowType" in d)
    import mlflow

    experiment = mlflow.MlflowClient(next(d for d in s["dashboards"] if d.startswith("mlflow ui")).split()[-1].strip("'"))
    eid = experiment.get_experiment_by_name("attnexp").experiment_id
    assert link == f"open 'http://127.0.0.1:5000/#/experiments/{eid}?workflowType=machine_learning'"
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'runs' / 'mlflow.db'}")
    [r] = client.search_runs([client.get_experiment_by_name("attnexp").experiment_id])
    assert r.info.status == "FINISHED" and r.info.run_name == "run"  # named after its folder
    assert len(client.get_metric_history(r.info.run_id, "val/loss")) == 2
    assert r.data.metrics["val/loss"] == pytest.approx(s["metrics"]["final"]["val/loss"], rel=1e-5)
    assert "attn/L0/entropy" in r.data.metrics
    assert r.data.params["model/d_model"] == "64" and r.data.params["attention/name"] == "mha"  # the composed config
    assert r.data.tags["attention"] == "mha" and r.data.tags["tag.first_look"] == "true"
    assert r.data.tags["run_dir"] == str(tmp_path / "run")
    # MLflow 3 opened the experiment on its GenAI view ("Traces 0 / No data available") before this tag
    assert client.get_experiment_by_name("attnexp").tags.get("mlflow.experimentKind") == "custom_model_development"
    # MLflow's Default experiment keeps its artifacts beside attnexp's (it pointed at <cwd>/mlruns/0 before)
    default = client.get_experiment("0").artifact_location
    assert default.removeprefix("file://") == str((tmp_path / "runs" / "mlartifacts" / "0").resolve()), default

    def files(path=None):
        out = []
        for f in client.list_artifacts(r.info.run_id, path):
            out += files(f.path) if f.is_dir else [f.path]
        return out

    found = files()
    assert {"summary.json", "config_resolved.yaml", "maps/viewer.html", "maps/evolution_ex0.gif"} <= set(found), found
    steps = {p for p in found if p.startswith("images/attention_maps") and p.endswith(".png")}
    assert len(steps) >= 2 * 2, found  # an image series: two examples, every epoch
    assert any(p.startswith("attention_head_stats/") for p in found), found  # the per-head table


def test_an_mlflow_run_that_does_not_complete_is_marked_failed(tmp_path):
    import lightning as L

    class Fails(L.Callback):
        def on_train_batch_end(self, trainer, *args):
            if trainer.global_step == 2:
                raise RuntimeError("a bug in the middle of training")

    run = run_of([*QUICK, "logger=mlflow", f"paths.log_dir={tmp_path / 'runs'}", "trainer.max_epochs=1"], tmp_path / "run")
    with pytest.raises(RuntimeError, match="a bug in the middle"):
        train(run, callbacks=[Fails()])
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'runs' / 'mlflow.db'}")
    [r] = client.search_runs([client.get_experiment_by_name("attnexp").experiment_id])
    assert r.info.status == "FAILED"


def test_many_leaves_out_a_logger_that_is_not_installed_and_a_named_one_needs_it(monkeypatch, caplog):
    specs = {"tensorboard": {"_target_": "lightning.pytorch.loggers.TensorBoardLogger"},
             "mlflow": {"_target_": "lightning.pytorch.loggers.MLFlowLogger"}}
    from attnexp.training import loggers

    assert set(loggers.installed_loggers(specs, "many")) == {"tensorboard", "mlflow"}  # installed here
    monkeypatch.setattr(loggers.ADAPTERS["MLFlowLogger"], "needs", ("no_such_module_attnexp", "mlflow"))
    caplog.set_level("INFO", logger="attnexp")
    assert set(loggers.installed_loggers(specs, "many")) == {"tensorboard"}
    assert "logger=many: mlflow left out (not installed: pip install 'attnexp[mlflow]')" in caplog.text
    with pytest.raises(ConfigError, match=r"logger=mlflow needs no_such_module_attnexp, which is not installed: "
                                          r"pip install 'attnexp\[mlflow\]'"):
        loggers.installed_loggers({"mlflow": specs["mlflow"]}, "mlflow")


def test_a_file_store_mlflow_refuses_is_one_line_before_the_run(tmp_path, monkeypatch, capsys):
    """Issue 68 item 7: MLFLOW_TRACKING_URI=file:... ended in a multi-line Hydra error (MLflow 3 refuses a
    file store unless MLFLOW_ALLOW_FILE_STORE=true); it is now the one-line check the other settings get."""
    from attnexp.cli import main

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"file:{tmp_path / 'mlruns'}")
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    assert main(["train", "logger=mlflow", "trainer.max_epochs=1", "data.n_sentences=100",
                 f"hydra.run.dir={tmp_path / 'run'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert "MLFLOW_ALLOW_FILE_STORE=true" in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "mlruns").exists()
