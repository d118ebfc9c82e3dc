"""Optuna's storages as attnexp names them (hydra.sweeper.storage): a database URL Optuna opens
itself, or `journal:FILE`, its JournalStorage on a file; the one place that tells them apart for
the sweeper, a job's pruning callback and `compare study=`."""

from __future__ import annotations

JOURNAL = "journal:"


def storage(url: str):
    """What optuna.create_study / load_study take for `url`: the URL itself, or a JournalStorage."""
    if not url.startswith(JOURNAL):
        return url
    import optuna
    from optuna.storages.journal import JournalFileBackend

    return optuna.storages.JournalStorage(JournalFileBackend(url[len(JOURNAL):]))
