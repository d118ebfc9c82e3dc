"""The ledger of a run's test reads (results.test_reads): which run a checkpoint belongs to, and an
evaluation whose run folder cannot take the line keeps its result and says so once."""

from __future__ import annotations

import logging

from attnexp.config import layout
from attnexp.results import test_reads
from attnexp.training.evaluate import noted_in_run


def run_folder(tmp_path):
    run = tmp_path / "run"
    (run / layout.CHECKPOINTS).mkdir(parents=True)
    (run / layout.SUMMARY).write_text("{}")
    return run


def test_a_checkpoint_belongs_to_the_run_folder_it_was_saved_in(tmp_path):
    run = run_folder(tmp_path)
    assert test_reads.run_of(run / layout.CHECKPOINTS / "last.ckpt") == run.resolve()
    assert test_reads.run_of(tmp_path / "loose.ckpt") is None  # not in a run's checkpoints/
    (run / layout.SUMMARY).unlink()
    assert test_reads.run_of(run / layout.CHECKPOINTS / "last.ckpt") is None  # not a run folder


def test_a_run_folder_that_cannot_take_the_line_is_said_once_and_the_eval_goes_on(tmp_path, caplog):
    run = run_folder(tmp_path)
    (run / layout.TEST_READS).mkdir()  # what open(..., "a") cannot append to, as a read-only folder
    with caplog.at_level(logging.WARNING, logger="attnexp"):
        assert noted_in_run(run / layout.CHECKPOINTS / "last.ckpt") is None
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == [f"the test read is not noted in {run.resolve()}"]
    (run / layout.TEST_READS).rmdir()
    assert noted_in_run(run / layout.CHECKPOINTS / "last.ckpt") == str(run.resolve())
    assert [r["by"] for r in test_reads.read(run)] == ["eval split=test"]
