"""Property-based (issue 52 item 6): generated cut, garbage, nested, binary and wrongly typed versions of
a real Optuna journal (a study with three finished trials). For each, the check a sweep runs before it
starts (hydra_plugins' check_journal): the journal accepted, or one line naming it (SweepError), never
another exception, and the file and its folder unchanged."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

optuna = pytest.importorskip("optuna", reason="the study's journal needs optuna: pip install 'attnexp[sweep]'")

from helpers.damaged_lines import damage, damaged  # noqa: E402
from hydra_plugins.attnexp_optuna_sweeper._study_storage import check_journal  # noqa: E402


@pytest.fixture(scope="module")
def journal_lines(tmp_path_factory) -> list[str]:
    from optuna.storages.journal import JournalFileBackend

    path = tmp_path_factory.mktemp("journal") / "study.log"
    study = optuna.create_study(study_name="s", storage=optuna.storages.JournalStorage(JournalFileBackend(str(path))))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study.optimize(lambda t: t.suggest_float("lr", 1e-4, 1e-2, log=True), n_trials=3)
    return path.read_text().splitlines()


DAMAGE = damage(["op_code", "worker_id", "study_id", "trial_id", "value", "state"], cut=3000)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(how=DAMAGE, where=st.integers(0, 20))
def test_a_damaged_journal_is_accepted_or_refused_in_one_line_and_left_as_it_was(tmp_path_factory, journal_lines, how,
                                                                                  where):
    folder = tmp_path_factory.mktemp("damaged")
    path = folder / "study.log"
    path.write_text(damaged(journal_lines, how, where), encoding="utf-8", errors="surrogateescape")
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    try:
        check_journal(path)
    except Exception as e:  # noqa: BLE001 - by name: Hydra's plugin scan may import the sweeper's module a second time
        assert type(e).__name__ == "SweepError", repr(e)
        assert "\n" not in str(e) and str(path) in str(e)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in folder.iterdir()) == ["study.log"]
