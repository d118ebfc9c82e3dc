"""Every run names its dashboard: the exact command at the end of the run and in summary.json
(before, no run said `tensorboard --logdir ...`, `mlflow ui --backend-store-uri ...`, and an Optuna
sweep ended without `optuna-dashboard <storage>`)."""

from __future__ import annotations

from attnexp.results.ending import end_of_run
from attnexp.training.loggers import dashboards, tensorboard_page
from hydra_plugins.attnexp_optuna_sweeper.sweeper import dashboard_command


def test_each_logger_names_the_command_that_opens_it(tmp_path):
    run = tmp_path / "run (1)"
    specs = {"tensorboard": {"_target_": "lightning.pytorch.loggers.TensorBoardLogger", "save_dir": str(run),
                             "name": "tensorboard"},
             "mlflow": {"_target_": "lightning.pytorch.loggers.MLFlowLogger", "tracking_uri": f"sqlite:///{tmp_path}/mlflow.db"},
             "wandb": {"_target_": "lightning.pytorch.loggers.WandbLogger", "save_dir": str(run), "offline": True}}
    page = tensorboard_page()
    assert dashboards(specs, run) == [f"tensorboard --logdir '{run}/tensorboard'", f"open '{page}'",
                                      f"mlflow ui --backend-store-uri sqlite:///{tmp_path}/mlflow.db",
                                      f"wandb sync '{run}/wandb'/offline-run-*"]
    block = end_of_run({"status": "completed", "run_dir": str(run), "metrics": {}, "dashboards": dashboards(specs, run)})
    assert f"  view     tensorboard --logdir '{run}/tensorboard'" in block.splitlines()


def test_the_tensorboard_page_pins_the_loss_curves_the_module_logs():
    """TensorBoard sorts its groups by tag (attn/ before train/ and val/); the page the run names pins
    the loss curves first, in the form TensorBoard 2.21's Time Series reads from its address (the
    e2e dashboards test opens it in Chromium and finds train/loss first)."""
    import json
    import urllib.parse

    url = urllib.parse.urlsplit(tensorboard_page(6007))
    assert (url.netloc, url.fragment) == ("localhost:6007", "timeseries")
    pins = json.loads(urllib.parse.parse_qs(url.query)["pinnedCards"][0])
    assert pins == [{"plugin": "scalars", "tag": "train/loss"}, {"plugin": "scalars", "tag": "val/loss"}]


def test_an_optuna_study_names_its_dashboard_without_the_password():
    from attnexp.config.study import StudyStorage

    def dashboard(url):
        return dashboard_command(StudyStorage.parse(url))

    assert dashboard("sqlite:///multirun/optuna/s.db") == "optuna-dashboard sqlite:///multirun/optuna/s.db"
    assert dashboard("journal:/shared/study.log") == "optuna-dashboard /shared/study.log"
    assert dashboard("postgresql+psycopg://me:secret@db:5432/optuna") == \
        "optuna-dashboard 'postgresql+psycopg://me:***@db:5432/optuna'"
    # a password holding "@" was half shown (SQLAlchemy's URL ends the password at the first "@")
    assert dashboard("postgresql+psycopg://me:p@ss:w/rd@db:5432/optuna") == \
        "optuna-dashboard 'postgresql+psycopg://me:***@db:5432/optuna'"
    assert dashboard(None) is None


def test_the_heads_line_says_why_change_points_were_not_sought_and_how_to_get_them(tmp_path):
    """Issue 50. Before: a README install (no `timeline` extra) printed `change points not sought` and
    neither why nor how to get them."""
    from attnexp.heads.changes import NEEDS
    from attnexp.results.ending import heads_line

    s = {"attention_maps": {"timeline": {"file": str(tmp_path / "maps" / "timeline.jsonl"), "readings": 5,
                                         "formations": [], "change_points_skipped": NEEDS}}}
    line = heads_line(s, tmp_path)
    assert "change points not sought (change points need ruptures: pip install 'attnexp[timeline]'" in line, line
