"""Dashboards opened as their users open them: a real server on 127.0.0.1, its HTTP API and a
headless-Chromium screenshot, stopped by PID (the dashboards issue): TensorBoard over a run,
optuna-dashboard over a study, an MLflow tracking server a run logs to."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.browser import needs_chromium
from helpers.runs import REPO, left_behind, own_tmp


@pytest.mark.slow
@needs_chromium
@pytest.mark.skipif(shutil.which("tensorboard") is None and not Path(sys.executable).with_name("tensorboard").exists(),
                    reason="needs TensorBoard (pip install tensorboard; a dependency of attnexp)")
def test_tensorboard_shows_a_runs_curves_maps_and_settings(tmp_path, tmp_path_factory):
    """scripts/studies/dashboards.py trains a short copy run, starts TensorBoard over it, reads its API and
    screenshots the Images and Scalars tabs: the script fails when a plugin has no data, a val/ or
    train/ curve is missing, or the attention maps hold fewer than two epochs."""
    env, tmp = own_tmp(tmp_path_factory)
    r = subprocess.run([sys.executable, "scripts/studies/dashboards.py", "--parts=tensorboard", f"--out={tmp_path}"],
                       cwd=REPO, capture_output=True, text=True, timeout=900, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert left_behind(tmp) == []  # its runs were in a temporary folder, removed
    found = json.loads(r.stdout[r.stdout.rindex("\n{") + 1:])  # after the training run's own lines
    assert {"scalars", "images", "hparams", "custom_scalars"} <= set(found["plugins_with_data"])
    assert {"attention_maps/example0", "head_roles"} <= set(found["image_tags"]) and len(found["steps_of_first_image"]) == 4
    # TensorBoard's Time Series opens on the maps' groups (align/, attn/: its groups sort by tag); the
    # page the run names pins the loss curves above them
    assert found["first_cards"]["plain"][0].split("/")[0] in ("align", "attn"), found["first_cards"]
    assert found["first_cards"]["named"][:2] == ["train/loss", "val/loss"], found["first_cards"]
    for tab in ("images", "scalars", "custom_scalars"):
        png = tmp_path / f"tensorboard_{tab}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 30_000  # a page, not a blank
    left = subprocess.run(["pgrep", "-f", f"tensorboard --logdir={found['run']}"], capture_output=True, text=True)
    assert left.stdout.strip() == "", "the TensorBoard server was not stopped"


@pytest.mark.slow
@needs_chromium
def test_optuna_dashboard_shows_a_studys_trials_and_their_run_folders(tmp_path, tmp_path_factory):
    """A 3-trial Optuna sweep into SQLite, optuna-dashboard started over it: its API lists every trial
    complete, with a value, the searched parameters and the trial's run folder; then a screenshot."""
    pytest.importorskip("optuna_dashboard", reason="needs optuna-dashboard (pip install -e '.[sweep]')")
    env, tmp = own_tmp(tmp_path_factory)
    r = subprocess.run([sys.executable, "scripts/studies/dashboards.py", "--parts=optuna", f"--out={tmp_path}",
                        f"--runs-in={tmp_path / 'runs'}"], cwd=REPO, capture_output=True, text=True, timeout=900, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert left_behind(tmp) == []  # the study and its runs in --runs-in, kept there for the checks below
    found = json.loads(r.stdout[r.stdout.rindex("\n{") + 1:])
    assert found["n_trials"] == 3 and found["states"] == ["Complete"] and all(found["values"])
    assert found["metric_names"] == ["val/loss"]  # the dashboard names the objective, not "Objective 0"
    assert {"optim.lr", "model.dropout"} <= set(found["params"])
    assert all(Path(d, "summary.json").is_file() for d in found["run_dirs"])  # each trial leads back to its run
    png = tmp_path / "optuna_dashboard.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 30_000
    left = subprocess.run(["pgrep", "-f", f"optuna-dashboard {found['storage']}"], capture_output=True, text=True)
    assert left.stdout.strip() == "", "the optuna-dashboard server was not stopped"


@pytest.mark.slow
@needs_chromium
def test_an_mlflow_server_holds_a_runs_metrics_config_and_maps(tmp_path, tmp_path_factory):
    """A real `mlflow server` (SQLite store, proxied artifacts) on 127.0.0.1, a 3-epoch copy run with
    logger=mlflow pointed at it, read back through MLflow's client: finished, every epoch's val/loss,
    the config as params, the tags, the map images and viewer.html stored by the server (not written
    beside it); then the run page and the viewer in MLflow's artifact view are pictured."""
    pytest.importorskip("mlflow", reason="needs MLflow (pip install -e '.[mlflow]')")
    env, tmp = own_tmp(tmp_path_factory)
    r = subprocess.run([sys.executable, "scripts/studies/dashboards.py", "--parts=mlflow", f"--out={tmp_path}"],
                       cwd=REPO, capture_output=True, text=True, timeout=900, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert left_behind(tmp) == []  # its runs were in a temporary folder, removed
    found = json.loads(r.stdout[r.stdout.rindex("\n{") + 1:])
    assert found["status"] == "FINISHED" and found["val_loss_points"] == 3 and found["run_name"] == "copy-run-for-the-dashboard"
    # the experiment's first page, opened in Chromium, lists the run (not MLflow 3's empty GenAI view)
    assert found["experiment_page"]["lists_the_run"] and not found["experiment_page"]["genai_view"], found["experiment_page"]
    assert found["artifact_uri"].startswith("mlflow-artifacts:")  # through the server, as on a lab's machine
    assert {"val/loss", "val/acc", "align/best", "attn/L0/entropy"} <= set(found["metrics"]) and found["n_params"] > 50
    assert found["tags"]["attention"] == "mha" and found["tags"]["tag.dashboards"] == "true"
    assert {"maps/viewer.html", "summary.json", "config_resolved.yaml"} <= set(found["artifacts"])
    assert sum(a.startswith("images/attention_maps~example0") and a.endswith(".png") for a in found["artifacts"]) == 4
    for name in ("mlflow_experiment", "mlflow_run", "mlflow_viewer"):
        png = tmp_path / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 30_000
    left = subprocess.run(["pgrep", "-f", f"backend-store-uri=sqlite:///{found['folder']}"], capture_output=True, text=True)
    assert left.stdout.strip() == "", "the MLflow server was not stopped"
