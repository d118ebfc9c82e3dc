"""The Optuna storages a sweep may name (hydra.sweeper.storage), checked as a stranger's before the
sweep starts: an SQLite file, a database server, a journal file; and the dashboard command for each."""

from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path

from attnexp.config.files import FileRefused, sqlite_tables
from attnexp.config.secrets import hide_password
from attnexp.config.study import StudyStorage


class SweepError(ValueError):
    """A sweep that cannot start, said in one line by the command line."""


# Every table Optuna's RDB storage makes (optuna/storages/_rdb/models.py) and alembic's own: a study
# file holding any other table is another tool's database, and Optuna would add its tables to it.
OPTUNA_TABLES = {"studies", "study_directions", "study_user_attributes", "study_system_attributes", "trials",
                 "trial_user_attributes", "trial_system_attributes", "trial_params", "trial_values",
                 "trial_intermediate_values", "trial_heartbeats", "version_info", "alembic_version"}


def check_sqlite(path: Path) -> None:
    """A study file that exists is a whole SQLite database holding only an Optuna study's tables,
    or one line saying what it is; it is opened read-only, so a refused file stays byte-identical."""
    if path.is_dir():
        raise SweepError(f"hydra.sweeper.storage: {path} is a folder; give a file for the study, e.g. "
                         f"hydra.sweeper.storage=sqlite:///{path}/study.db")
    if not path.exists():
        return

    try:
        tables = sqlite_tables(path)
    except FileRefused as e:
        raise SweepError(f"hydra.sweeper.storage: {path} is {e}; give a new file name, or move it away to start the "
                         f"study afresh") from None
    only_optunas(tables, path, "give a new file name, or move it away to start the study afresh")


def only_optunas(tables: set[str], where, fix: str) -> None:
    """The one 'another tool's database' check, for a study file and a server alike."""
    foreign = sorted(tables - OPTUNA_TABLES)
    if foreign:
        raise SweepError(f"hydra.sweeper.storage: {where} is another tool's database (it holds tables "
                         f"{', '.join(foreign[:4])}{' ...' if len(foreign) > 4 else ''}, which no Optuna study has); {fix}")


def check(storage: StudyStorage | None) -> None:
    """The storage a sweep names, checked before it starts (one line each): an SQLite file, a journal
    file's folder, or a database server."""
    if storage is None:
        return
    if storage.kind == "sqlite":
        check_sqlite(storage.path)
    elif storage.kind == "journal":
        if storage.path.is_dir():
            raise SweepError(f"hydra.sweeper.storage: {storage.path} is a folder; give a file for the journal, e.g. "
                             f"hydra.sweeper.storage=journal:{storage.path}/study.log")
        check_journal(storage.path)
    else:
        check_server(storage)


def check_journal(path: Path) -> None:
    """A journal file that exists is replayed once before the sweep starts, as Optuna will: one that is
    cut short, garbage or another tool's file is one line naming it (not Optuna's reader's traceback),
    and it is left as it was."""
    if not path.exists():
        return
    if not path.is_file():
        raise SweepError(f"hydra.sweeper.storage: {path} is not a file (a pipe or a device); give the study's journal file")
    import optuna
    from optuna.storages.journal import JournalFileBackend

    try:
        optuna.storages.JournalStorage(JournalFileBackend(str(path))).get_all_studies()
    except Exception as e:  # noqa: BLE001 - Optuna's reader raises what the bytes make it raise
        first = " ".join(str(e).split())[:100] or type(e).__name__
        raise SweepError(f"hydra.sweeper.storage: {path} is not a whole Optuna journal ({type(e).__name__}: {first}); "
                         f"give a new file name, or move it away to start the study afresh") from None


def check_server(storage: StudyStorage) -> None:
    """A database server's storage, checked before the sweep starts: reachable, the password right, and
    the database Optuna's (empty, or holding only an Optuna study's tables); one line each, nothing
    written into a database that is not Optuna's."""
    if storage.shown != storage.url:
        raise SweepError(f"hydra.sweeper.storage: {storage.shown} holds a password, which Hydra would write into every "
                         f"job's .hydra/hydra.yaml; take it out of the config and give it in PGPASSWORD or ~/.pgpass "
                         f"(or on the command line, where attnexp moves it to PGPASSWORD)")
    url, shown = storage.url, storage.shown
    try:
        from sqlalchemy import create_engine, inspect
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError
    except ImportError:
        raise SweepError("hydra.sweeper.storage: a database server needs SQLAlchemy: pip install 'attnexp[sweep]'") from None
    try:
        make_url(url)
    except ArgumentError:
        raise SweepError(f"hydra.sweeper.storage={shown!r} is not a database URL; e.g. sqlite:///study.db, "
                         f"postgresql+psycopg://USER@HOST:5432/DB (the password in PGPASSWORD) or journal:FILE") from None
    try:
        engine = create_engine(url, connect_args={"connect_timeout": 5} if storage.postgresql else {})
    except (NoSuchModuleError, ImportError, ModuleNotFoundError) as e:
        raise SweepError(f"hydra.sweeper.storage: {shown} needs a driver that is not installed ({e}); for PostgreSQL: "
                         f"pip install 'attnexp[sweep]' (psycopg) and write postgresql+psycopg://...") from None
    try:
        with engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
    except SQLAlchemyError as e:
        first = hide_password(" ".join(str(getattr(e, "orig", None) or e).split())[:160])
        raise SweepError(f"hydra.sweeper.storage: cannot use {shown}: {first}; check that the server runs, the "
                         f"address, the user and the password") from None
    finally:
        engine.dispose()
    only_optunas(tables, shown, "give Optuna a database of its own (CREATE DATABASE optuna)")


def open_to_read(storage: StudyStorage):
    """A study's storage for `compare study=`: checked as a sweep's is, and opened read-only; a file that
    is missing or not a regular file is one line (nothing is created)."""
    if storage.kind in ("sqlite", "journal"):
        if not storage.path.is_file():
            raise SweepError(f"storage: {storage.path} is {'not a file' if storage.path.exists() else 'not there'}; give "
                             f"the study's file as the sweep named it (hydra.sweeper.storage)")
    check(storage)
    return storage.read_only()


STUDY_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,127}")


def check_study_name(name: str) -> None:
    """A study name is a name: it becomes the default study file's name inside the sweep folder."""
    if not STUDY_NAME.fullmatch(str(name)) or ".." in str(name):
        raise SweepError(f"hydra.sweeper.study_name={str(name)[:80]!r} is not a study name: use letters, digits and "
                         f"_ . + - (no '..', no '/'), at most 128 characters")


# The key of the PostgreSQL advisory lock that launches hold while Optuna makes its tables ("attnexp" in ASCII).
SCHEMA_LOCK = 0x617474_6E657870


@contextmanager
def schema_lock(storage: StudyStorage | None):
    """Held while a launch opens the study: on an empty PostgreSQL database, launches started at once
    each had Optuna create its tables, and all but one failed on the same CREATE TABLE
    (UniqueViolation on pg_type). One holds the lock and makes them; the others then find them made.
    A no-op for SQLite (one writer at a time already), a journal file, or memory."""
    if storage is None or not storage.postgresql:
        yield
        return
    from sqlalchemy import create_engine, text

    engine = create_engine(storage.url, connect_args={"connect_timeout": 5})
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": SCHEMA_LOCK})
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": SCHEMA_LOCK})
    finally:
        engine.dispose()


def dashboard_command(storage: StudyStorage | None) -> str | None:
    """The optuna-dashboard command for a study's storage (a server's password shown as ***)."""
    import shlex

    if storage is None:
        return None
    if storage.kind == "journal":
        return f"optuna-dashboard {shlex.quote(str(storage.path))}"
    return f"optuna-dashboard {shlex.quote(storage.shown)}"
