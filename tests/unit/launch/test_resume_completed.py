"""resume=auto on a folder whose run completed: not trained again (a re-launched sweep's finished job),
and never taken for a run it is not. Before, a command asking for another model, or for more epochs,
was answered with the folder's old run in silence (exit 0, and its value given to the sweep)."""

from __future__ import annotations

import json

import pytest

from attnexp.cli import main

SMALL = ["data.n_sentences=100", "logger=none", "maps.enabled=false", "test=false", "trainer.enable_progress_bar=false",
         "model.n_layers=2"]


@pytest.fixture(scope="module")
def completed(tmp_path_factory):
    out = tmp_path_factory.mktemp("done") / "run"
    assert main(["train", f"hydra.run.dir={out}", "trainer.max_epochs=1", *SMALL]) == 0
    return out


def record(out):
    return json.loads((out / "summary.json").read_text())


def test_the_same_command_again_is_left_alone_in_silence(completed, capsys):
    before = record(completed)
    assert main(["train", f"hydra.run.dir={completed}", "resume=auto", "trainer.max_epochs=1", *SMALL]) == 0
    assert "already completed" not in capsys.readouterr().err and record(completed) == before


def test_more_epochs_asked_of_a_completed_run_are_said_with_the_way_on(completed, capsys):
    before = record(completed)
    assert main(["train", f"hydra.run.dir={completed}", "resume=auto", "trainer.max_epochs=3", *SMALL]) == 0
    err = capsys.readouterr().err
    assert f"already completed (1 epochs, {before['steps']} steps)" in err and f"resume={completed}/checkpoints/" in err
    assert record(completed) == before


def test_another_model_is_refused_and_the_folder_left_as_it_was(completed, capsys):
    before, hydra = record(completed), (completed / ".hydra" / "overrides.yaml").read_text()
    assert main(["train", f"hydra.run.dir={completed}", "resume=auto", "trainer.max_epochs=1", *SMALL,
                 "model.n_layers=4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds a different model: model.n_layers=2 (this run: 4)" in err, err
    assert record(completed) == before and (completed / ".hydra" / "overrides.yaml").read_text() == hydra  # before Hydra


def test_a_relaunched_sweep_asking_another_model_fails_its_jobs(tmp_path, capsys):
    sweep = ["train", "-m", f"hydra.sweep.dir={tmp_path}", "seed=1,2", "trainer.max_epochs=1", *SMALL]
    assert main(sweep) == 0
    assert main([*sweep, "resume=auto", "model.n_layers=4"]) == 1
    err = capsys.readouterr().err
    assert "2 run(s) of the sweep failed" in err and err.count("holds a different model") == 2, err
