"""The Optuna storages a sweep may name (hydra.sweeper.storage), checked as a stranger's before the
sweep starts: an SQLite file, a database server, a journal file; and the dashboard command for each."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path


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
    with open(path, "rb") as f:
        head = f.read(16)
    problem = None if head == b"SQLite format 3\x00" else "not an SQLite database"
    if problem is None:
        import sqlite3

        try:
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
                ok = db.execute("PRAGMA quick_check").fetchone()[0]
                tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            problem = None if ok == "ok" else f"a damaged SQLite database ({ok[:60]})"
            foreign = sorted(t for t in tables - OPTUNA_TABLES if not t.startswith("sqlite_"))
            if problem is None and foreign:
                problem = (f"another tool's database (it holds tables {', '.join(foreign[:4])}"
                           f"{' ...' if len(foreign) > 4 else ''}, which no Optuna study has)")
        except sqlite3.DatabaseError as e:
            problem = f"a damaged SQLite database ({e})"
    if problem:
        raise SweepError(f"hydra.sweeper.storage: {path} is {problem}; give a new file name, or move it away to "
                         f"start the study afresh")


def check_server(url: str) -> None:
    """A database server's storage, checked before the sweep starts: reachable, the password right, and
    the database Optuna's (empty, or holding only an Optuna study's tables); one line each, nothing
    written into a database that is not Optuna's. A journal file is checked by its folder."""
    if url.startswith("journal:"):
        path = Path(url[len("journal:"):])
        if path.is_dir():
            raise SweepError(f"hydra.sweeper.storage: {path} is a folder; give a file for the journal, e.g. "
                             f"hydra.sweeper.storage=journal:{path}/study.log")
        return
    try:
        from sqlalchemy import create_engine, inspect
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError
    except ImportError:
        raise SweepError("hydra.sweeper.storage: a database server needs SQLAlchemy: pip install 'attnexp[sweep]'") from None
    try:
        shown = make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        raise SweepError(f"hydra.sweeper.storage={url!r} is not a database URL; e.g. sqlite:///study.db, "
                         f"postgresql+psycopg://USER:PASSWORD@HOST:5432/DB or journal:FILE") from None
    try:
        engine = create_engine(url, connect_args={"connect_timeout": 5} if url.startswith("postgresql") else {})
    except (NoSuchModuleError, ImportError, ModuleNotFoundError) as e:
        raise SweepError(f"hydra.sweeper.storage: {shown} needs a driver that is not installed ({e}); for PostgreSQL: "
                         f"pip install 'attnexp[sweep]' (psycopg) and write postgresql+psycopg://...") from None
    try:
        with engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
    except SQLAlchemyError as e:
        first = " ".join(str(getattr(e, "orig", None) or e).split())[:160]
        raise SweepError(f"hydra.sweeper.storage: cannot use {shown}: {first}; check that the server runs, the "
                         f"address, the user and the password") from None
    finally:
        engine.dispose()
    foreign = sorted(tables - OPTUNA_TABLES)
    if foreign:
        raise SweepError(f"hydra.sweeper.storage: {shown} is another tool's database (it holds tables "
                         f"{', '.join(foreign[:4])}{' ...' if len(foreign) > 4 else ''}, which no Optuna study has); "
                         f"give Optuna a database of its own (CREATE DATABASE optuna)")


# The key of the PostgreSQL advisory lock that launches hold while Optuna makes its tables ("attnexp" in ASCII).
SCHEMA_LOCK = 0x617474_6E657870


@contextmanager
def schema_lock(url: str | None):
    """Held while a launch opens the study: on an empty PostgreSQL database, launches started at once
    each had Optuna create its tables, and all but one failed on the same CREATE TABLE
    (UniqueViolation on pg_type). One holds the lock and makes them; the others then find them made.
    A no-op for SQLite (one writer at a time already), a journal file, or memory."""
    if not url or not url.startswith("postgresql"):
        yield
        return
    from sqlalchemy import create_engine, text

    engine = create_engine(url, connect_args={"connect_timeout": 5})
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": SCHEMA_LOCK})
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": SCHEMA_LOCK})
    finally:
        engine.dispose()


def dashboard_command(url: str | None) -> str | None:
    """The optuna-dashboard command for a study's storage (a server's password shown as ***)."""
    import shlex

    if not url:
        return None
    if url.startswith("journal:"):
        return f"optuna-dashboard {shlex.quote(url[len('journal:'):])}"
    if not url.startswith("sqlite"):
        try:
            from sqlalchemy.engine import make_url

            url = make_url(url).render_as_string(hide_password=True)
        except Exception:  # noqa: BLE001 - an unparsable URL was refused before the sweep started
            pass
    return f"optuna-dashboard {shlex.quote(url)}"
