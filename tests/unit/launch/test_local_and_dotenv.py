"""lightning-hydra-template's two machine-specific habits: an optional `local` config group (one
machine's paths and settings, never committed) and a `.env` file whose variables `${oc.env:X}`
sees. Before: `local=...` was not a group and `${oc.env:X}` saw nothing of a .env."""

from __future__ import annotations

import os

import pytest

from attnexp.cli import load_env, main

LOCAL = """\
# @package _global_
trainer:
  max_epochs: 5
paths:
  data_dir: /data/on/this/machine
"""


@pytest.fixture
def local_conf(tmp_path):
    (tmp_path / "myconf" / "local").mkdir(parents=True)
    (tmp_path / "myconf" / "local" / "default.yaml").write_text(LOCAL)
    return tmp_path / "myconf"


def shown(capsys, *args: str) -> str:
    assert main(["train", *args, "--cfg", "job", "--resolve"]) == 0
    return capsys.readouterr().out


def test_a_local_default_applies_over_the_experiment_and_under_the_command_line(local_conf, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    out = shown(capsys, "--config-dir", str(local_conf), "experiment=copy")  # copy's own max_epochs is not 5
    assert "max_epochs: 5" in out and "data_dir: /data/on/this/machine" in out
    assert "max_epochs: 2" in shown(capsys, "--config-dir", str(local_conf), "experiment=copy", "trainer.max_epochs=2")
    assert "max_epochs: 5" not in shown(capsys, "experiment=copy")  # optional: without one, nothing changes


def test_an_experiments_paths_are_kept(tmp_path, capsys, monkeypatch):
    """Before, paths/default came after the experiment in the defaults list and undid its paths."""
    (tmp_path / "myconf" / "experiment").mkdir(parents=True)
    (tmp_path / "myconf" / "experiment" / "mine.yaml").write_text("# @package _global_\npaths:\n  sweep_dir: my_sweeps\n")
    monkeypatch.chdir(tmp_path)
    assert "sweep_dir: my_sweeps" in shown(capsys, "--config-dir", "myconf", "experiment=mine")


def test_the_local_group_is_never_shipped_nor_committed():
    from pathlib import Path

    repo = Path(__file__).resolve().parents[3]
    assert "conf/local/" in (repo / ".gitignore").read_text().splitlines()
    assert "prune conf/local" in (repo / "MANIFEST.in").read_text().splitlines()
    assert '"local"' in (repo / "setup.py").read_text()  # the wheel's copy of conf/ leaves it out


def test_a_dotenv_in_the_folder_reaches_oc_env_and_the_environment_wins(tmp_path, capsys, monkeypatch):
    (tmp_path / ".env").write_text("ATTNEXP_TEST_LOGS=/from/dotenv\nATTNEXP_TEST_SET=/from/dotenv\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ATTNEXP_TEST_SET", "/from/environment")
    monkeypatch.delenv("ATTNEXP_TEST_LOGS", raising=False)
    monkeypatch.delenv("ATTNEXP_ENV_FILE", raising=False)
    out = shown(capsys, "paths.log_dir=${oc.env:ATTNEXP_TEST_LOGS,nowhere}", "paths.sweep_dir=${oc.env:ATTNEXP_TEST_SET}")
    assert "log_dir: /from/dotenv" in out and "sweep_dir: /from/environment" in out


def test_no_dotenv_changes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = dict(os.environ)
    load_env()
    assert dict(os.environ) == before


def test_a_sweep_goes_under_the_experiments_sweep_dir(tmp_path, monkeypatch):
    """The sweep's folder is named before Hydra runs (launch/plan.py, from the composed config); before,
    it read paths/default.yaml as text and put an experiment's sweep under multirun/ all the same."""
    from attnexp.launch.command_line import precheck
    from attnexp.launch.compose import with_config_dir
    from attnexp.launch.plan import Plan

    def sweep_dir(overrides):  # what the sweep's folder is made under: train_cli passes it to sweep_arguments
        plan = Plan.of(["-m", *overrides])
        assert precheck(overrides, True, plan=plan) is None
        return str(plan.folder)

    (tmp_path / "myconf" / "experiment").mkdir(parents=True)
    (tmp_path / "myconf" / "experiment" / "mine.yaml").write_text("# @package _global_\npaths:\n  sweep_dir: my_sweeps\n")
    monkeypatch.chdir(tmp_path)
    assert sweep_dir(with_config_dir(["experiment=mine", "seed=0,1"], "myconf")) == "my_sweeps"
    assert sweep_dir(["seed=0,1"]) == "multirun" and sweep_dir(["paths.sweep_dir=elsewhere", "seed=0,1"]) == "elsewhere"
    # a command whose fixed part does not compose is one line before any folder is needed
    assert "attention=nope is not an option" in precheck(["paths.sweep_dir=there", "attention=nope", "seed=0,1"], True)


def test_a_local_file_written_as_the_docs_say_takes_effect(tmp_path, capsys, monkeypatch):
    """Issue 50. Before: a local/default.yaml without `# @package _global_` (which no doc mentioned) was
    silently ignored: its settings landed under a new `local:` key. Its place in the order: over the
    experiment, under the command line."""
    (tmp_path / "myconf" / "local").mkdir(parents=True)
    (tmp_path / "myconf" / "local" / "default.yaml").write_text("trainer:\n  max_epochs: 3\n")
    monkeypatch.chdir(tmp_path)
    out = shown(capsys, "--config-dir", "myconf", "experiment=copy")
    assert "max_epochs: 3" in out and "local:" not in out
    assert "max_epochs: 9" in shown(capsys, "--config-dir", "myconf", "experiment=copy", "trainer.max_epochs=9")
