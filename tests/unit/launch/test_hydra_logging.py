"""Hydra's logging options work as Hydra documents them. Before, config.yaml set
hydra.job_logging.handlers.file.delay, which merged into `hydra/job_logging=disabled` (no handlers)
a 'file' handler with no class: the run ended in "ValueError: Unable to configure handler 'file'"."""

from __future__ import annotations

import pytest

from attnexp.cli import main

SMALL = ["trainer.max_epochs=1", "data.n_sentences=100", "logger=none", "maps.enabled=false", "test=false",
         "trainer.enable_progress_bar=false"]


@pytest.mark.parametrize("choice,log", [([], True), (["hydra/job_logging=disabled", "hydra/hydra_logging=disabled"], False),
                                        (["hydra/job_logging=stdout"], False)], ids=["default", "disabled", "stdout"])
def test_hydras_job_logging_options_run(choice, log, tmp_path):
    out = tmp_path / "run"
    assert main(["train", *choice, f"hydra.run.dir={out}", *SMALL]) == 0
    assert (out / "summary.json").is_file() and (out / "train.log").is_file() == log
    if log:  # the file handler holds the run's lines
        assert (out / "train.log").stat().st_size > 0
