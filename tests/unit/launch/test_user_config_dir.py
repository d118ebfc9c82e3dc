"""A user's own conf folder beside attnexp's: Hydra's `--config-dir DIR` and `hydra.searchpath`
both add it, so their experiment/, attention/ and data/ yaml compose with attnexp's, checks and
did-you-mean included. Before, `--config-dir` was refused ("experiment=mine is not an option of
experiment": attnexp's own check composed without it)."""

from __future__ import annotations

import pytest

from attnexp.cli import main
from attnexp.launch.command_line import sweep_jobs
from attnexp.launch.compose import with_config_dir

MINE = """\
# @package _global_
# my experiment: rotary attention, three layers
defaults:
  - override /attention: rotary
model:
  n_layers: 3
"""
WIDE_WINDOW = """\
defaults:
  - /attention_schema@_here_
  - _self_

name: sliding_window
window: 9
"""


@pytest.fixture
def user_conf(tmp_path):
    conf = tmp_path / "myconf"
    (conf / "experiment").mkdir(parents=True)
    (conf / "attention").mkdir()
    (conf / "experiment" / "mine.yaml").write_text(MINE)
    (conf / "attention" / "wide_window.yaml").write_text(WIDE_WINDOW)
    return conf


@pytest.mark.parametrize("how", ["--config-dir", "searchpath"])
def test_a_users_experiment_and_attention_compose_with_attnexps(user_conf, how, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    where = ["--config-dir", "myconf"] if how == "--config-dir" else [f"hydra.searchpath=[file://{user_conf}]"]
    assert main(["train", *where, "experiment=mine", "--cfg", "job"]) == 0
    shown = capsys.readouterr().out
    assert "name: rotary" in shown and "n_layers: 3" in shown
    assert main(["train", *where, "attention=wide_window", "--cfg", "job"]) == 0
    assert "window: 9" in capsys.readouterr().out


def test_a_users_option_is_checked_and_suggested(user_conf, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--config-dir", "myconf", "experiment=mien", "--cfg", "job"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("attnexp: config error: experiment=mien is not an option of experiment "
                          "(did you mean experiment=mine?); choose one of: copy, induction,") and "\n" not in err
    assert ", mine," in err  # the user's option among attnexp's own
    assert main(["train", "--config-dir", "myconf", "attention=wide_window", "attention.window=0", "--cfg", "job"]) == 2
    assert "window" in capsys.readouterr().err  # the variant's own check on the user's option


def test_a_missing_config_dir_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--config-dir", "nowhere", "--cfg", "job"]) == 2
    assert capsys.readouterr().err.strip() == (
        "attnexp: config error: --config-dir nowhere: no such folder; give the folder that holds your own "
        "experiment/, attention/ or data/ yaml files (docs/extending.md)")


def test_a_sweep_over_every_experiment_includes_the_users(user_conf):
    jobs = sweep_jobs(with_config_dir(["experiment=glob(*)"], str(user_conf)))
    assert any("experiment=mine" in job for job in jobs) and any("experiment=copy" in job for job in jobs)


SEARCH = """\
# @package _global_
# my search: attnexp's Optuna sweeper chosen by an experiment, not by hparams_search=optuna
defaults:
  - override /hydra/sweeper: attnexp_optuna
"""


@pytest.mark.parametrize("bad, says", [
    ("hydra.sweeper.sampler.n_startup_trials=5", "hydra.sweeper.sampler.n_startup_trials is not a key of attnexp's "
                                                 "Optuna sweeper (attnexp's sampler takes only"),
    ("hydra.sweeper.n_trails=5", "hydra.sweeper.n_trails is not a key of attnexp's Optuna sweeper; it takes"),
    ("model.n_layer=5", "model.n_layer is not a config key; did you mean model.n_layers?"),
])
def test_a_mistake_is_explained_by_what_the_rest_of_the_command_line_composes(user_conf, bad, says, capsys, monkeypatch,
                                                                             tmp_path):
    """Whether a hydra.sweeper key is the Optuna sweeper's was read from the text `hparams_search=optuna` on
    the command line: a user's experiment that picks the sweeper got "Cannot convert 'dict' to string" and
    "not a config key" for the same two mistakes (issue 51: decide from the composed config)."""
    (user_conf / "experiment" / "search.yaml").write_text(SEARCH)
    monkeypatch.chdir(tmp_path)
    assert main(["train", "-m", "--config-dir", "myconf", "experiment=search", bad]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"attnexp: config error: {says}") and "\n" not in err, err


SEEDS = """\
# @package _global_
# a sweep defined in a config, as Hydra allows: no -m on the command line
hydra:
  mode: MULTIRUN
  sweeper:
    params:
      seed: 1,2
"""


def test_a_config_that_sets_hydra_mode_multirun_is_planned_as_a_sweep(user_conf, capsys, monkeypatch, tmp_path):
    """Single run or sweep was read from the -m flag alone while Hydra reads hydra.mode from the composed
    config: an experiment setting hydra.mode=MULTIRUN ran as a sweep that attnexp had checked and named as
    one run (job folders named after every override, no results.md, no failure list). Issue 51: decide
    from the composed config."""
    (user_conf / "experiment" / "seeds.yaml").write_text(SEEDS)
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--config-dir", "myconf", "experiment=seeds", "logger=none", "maps.enabled=false",
                 "trainer.max_epochs=1", "data.n_sentences=100", "test=false"]) == 0
    (sweep,) = (tmp_path / "multirun").glob("*/*")
    assert sorted(p.name for p in sweep.iterdir() if p.is_dir()) == ["0_seed=1", "1_seed=2"]
    assert "2 completed" in (sweep / "results.md").read_text()
    capsys.readouterr()
    assert main(["train", "--config-dir", "myconf", "experiment=seeds", "--cfg", "job"]) == 0  # shown, as Hydra shows it
    assert "seed: 0" in capsys.readouterr().out


def test_hydra_mode_multirun_with_the_optuna_sweeper_runs_the_study(capsys, monkeypatch, tmp_path):
    """The re-plan as -m came after the single run's check, which refused the Optuna sweeper with "add -m
    ... without it this would be one ordinary run": untrue where the composed hydra.mode makes Hydra sweep.
    A config that sweeps is checked as the sweep it is."""
    pytest.importorskip("optuna", reason="needs Optuna (pip install -e '.[sweep]')")
    monkeypatch.chdir(tmp_path)
    assert main(["train", "hparams_search=optuna", "hydra.mode=MULTIRUN", "hydra.sweeper.n_trials=1", "logger=none",
                 "maps.enabled=false", "trainer.max_epochs=1", "data.n_sentences=100", "test=false"]) == 0
    assert "add -m" not in capsys.readouterr().err
    (sweep,) = (p for p in (tmp_path / "multirun").glob("*/*") if p.is_dir())  # beside multirun/optuna/<study>.db
    assert (sweep / "results.md").is_file() and list((tmp_path / "multirun" / "optuna").glob("*.db"))
