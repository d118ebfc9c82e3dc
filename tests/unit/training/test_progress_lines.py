"""Issue 68 item 4: scoring the test split said nothing for minutes where no progress bar is drawn
(experiment=newsgroups: about 8 minutes for 7,532 posts when not on a tty). Where no bar is drawn, a
test pass now says it starts (with its batches), says how far it is every EpochLines.EVERY_S seconds,
and says when it is done; a long validation says how far it is too."""

from __future__ import annotations

import logging

from attnexp.api import train
from attnexp.training.console import EpochLines
from helpers.runs import run_of


def test_a_test_pass_says_it_starts_how_far_it_is_and_when_it_is_done(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(EpochLines, "EVERY_S", 0.0)  # a line every batch: the pass's lines, whatever its length
    with caplog.at_level(logging.INFO, logger="attnexp"):
        train(run_of(["trainer.max_epochs=1", "data.n_sentences=300", "logger=none", "maps.enabled=false",
                      "trainer.enable_progress_bar=false", "test=true"], tmp_path))
    said = [r.getMessage() for r in caplog.records]
    testing = [m for m in said if m.startswith("testing:")]
    assert testing[0].endswith("batches") and testing[-1].startswith("testing: done in "), testing
    assert any(m.startswith("testing: batch 1 of ") for m in testing), testing
    assert any(m.startswith("validating: batch ") for m in said)
