"""The loggers honour their standard environment variables unless a config sets the value (issue 50).
Before: MLFLOW_TRACKING_URI, which the docs say a .env passes to the loggers, was ignored with
logger=mlflow (its yaml always passed the local SQLite address), and WANDB_MODE / WANDB_DIR with
logger=wandb (offline: true and the run folder always)."""

from __future__ import annotations

from omegaconf import OmegaConf

from helpers.runs import compose_cfg


def loggers(*overrides: str) -> dict:
    return OmegaConf.to_container(compose_cfg(["logger=many", *overrides]).logger, resolve=True)


def test_the_environment_chooses_where_the_loggers_write(monkeypatch, tmp_path):
    for key in ("MLFLOW_TRACKING_URI", "WANDB_MODE", "WANDB_DIR"):
        monkeypatch.delenv(key, raising=False)
    plain = loggers()
    assert plain["mlflow"]["tracking_uri"].startswith("sqlite:///") and plain["wandb"]["offline"] is True
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5999")
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb_runs"))
    env = loggers()
    assert env["mlflow"]["tracking_uri"] == "http://127.0.0.1:5999"
    assert env["wandb"]["offline"] is False and env["wandb"]["save_dir"] == str(tmp_path / "wandb_runs")
    monkeypatch.setenv("WANDB_MODE", "dryrun")
    assert loggers()["wandb"]["offline"] is True
    # a value the config sets wins over the environment
    assert loggers("logger.mlflow.tracking_uri=sqlite:////tmp/mine.db")["mlflow"]["tracking_uri"] == "sqlite:////tmp/mine.db"
