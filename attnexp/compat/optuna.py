"""The study internals the sweeper's heartbeats and a job's trial use (study._storage,
trial._trial_id): tests/unit/test_private_apis.py holds them to the installed Optuna. The storage a
study lives in is attnexp.config.study.StudyStorage."""

from __future__ import annotations


def study_storage(study):
    """The storage object behind a study (its heartbeats are recorded there)."""
    return study._storage


def trial_ids(trials) -> list[int]:
    """The storage's ids of trials asked by study.ask()."""
    return [t._trial_id for t in trials]


def trial_of(study, number: int):
    """A Trial of `study` by its number, as Optuna's own workers build one that another process asked."""
    import optuna

    return optuna.trial.Trial(study, study._storage.get_trial_id_from_study_id_trial_number(study._study_id, number))
