"""An Optuna study on a journal file that goes bad while the sweep runs (issue 52). The checks before a
sweep starts are in tests/unit/launch/test_secrets_and_studies.py."""

from __future__ import annotations

import pytest

from helpers.runs import attnexp


@pytest.mark.slow
def test_a_journal_damaged_while_the_sweep_runs_stops_it_in_one_line(tmp_path):
    """Issue 52. Before: a journal damaged during the sweep (garbage from another writer) was a traceback
    of Optuna's journal reader; now one line naming it and where the finished trials are."""
    journal = tmp_path / "study.log"
    r = attnexp("train", "-m", "hparams_search=optuna", f"hydra.sweeper.storage=journal:{journal}",
                "hydra.sweeper.study_name=j", "hydra.sweeper.n_trials=3", "trainer.max_epochs=1", "data.n_sentences=200",
                "logger=none", "maps.enabled=false", "test=false", "trainer.enable_progress_bar=false",
                "+callbacks.damage._target_=helpers.damage.AppendGarbage", f"+callbacks.damage.path={journal}",
                f"hydra.sweep.dir={tmp_path / 'sweep'}", cwd=tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
    said = [x for x in r.stderr.splitlines() if "could not be read while the sweep ran" in x]
    assert len(said) == 1 and str(journal) in said[0] and "python -m attnexp compare" in said[0], r.stderr[-2000:]
    assert (tmp_path / "sweep" / "trial0" / "summary.json").is_file()  # the finished trial kept
