"""The MLflow adapter's local store (training/loggers.py's MLflow): a `sqlite:///FILE` tracking URI read
once, the store checked before the run as a stranger's file, and a new one created with its Default
experiment's artifacts beside attnexp's. A tracking server is MLflow's own to check."""

from __future__ import annotations

import os
from pathlib import Path

from attnexp.config import ConfigError, check
from attnexp.config.checks import unwritable
from attnexp.config.files import FileRefused, sqlite_file, sqlite_tables


def check_store(uri: str) -> None:
    """MLflow's local SQLite store, checked before the run as a stranger's file: its path must stay a
    path inside a URL (MLflow parses it as one: a '?' or '#' in paths.log_dir cut it and wrote the
    store elsewhere), its folder writable, and the file, when it exists, a whole SQLite database."""
    file_store = uri.lower().startswith("file:") or uri.startswith(("/", "./", "../", "~"))  # MLflow's FileStore
    if file_store and os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() not in ("true", "1"):
        raise ConfigError(f"MLflow 3 refuses a file store ({uri}) unless MLFLOW_ALLOW_FILE_STORE=true; use "
                          f"sqlite:///PATH/mlflow.db (attnexp's default store), a tracking server's http://HOST:PORT, or "
                          f"set MLFLOW_ALLOW_FILE_STORE=true")
    path = sqlite_file(uri)
    if path is None:
        return  # a tracking server, or another store MLflow checks itself

    bad = sorted({c for c in "?#" if c in str(path)})
    check(not bad, f"paths.log_dir holds {' and '.join(repr(c) for c in bad)}, which MLflow's SQLite store URI "
                   f"({uri}) cannot carry; choose a folder name without them, or set logger.mlflow.tracking_uri=URI")
    problem = unwritable(path.parent, "paths.log_dir", "MLflow's store in")
    check(problem is None, problem or "")
    if path.exists():
        try:  # the same check an Optuna study file takes (config.files.sqlite_tables)
            tables = sqlite_tables(path)
        except FileRefused as e:
            raise ConfigError(f"MLflow's store {path} is not a whole SQLite database ({str(e)[:60]}); move it away (a "
                              f"new one is made) or set logger.mlflow.tracking_uri=URI") from None
        check(not tables or "experiments" in tables, f"MLflow's store {path} is another tool's database (it holds "
              f"{', '.join(sorted(tables)[:4])}, not MLflow's experiments); move it away or set logger.mlflow.tracking_uri=URI")
        check(os.access(path, os.W_OK), f"MLflow's store {path} is read-only; make it writable, or set "
                                        f"logger.mlflow.tracking_uri=URI")


def create_store(db: Path, uri: str, artifacts: str) -> None:
    """A new SQLite store whose Default experiment (id 0, which MLflow creates with every store) keeps
    its artifacts beside attnexp's, `<artifacts>/0`: created by MLflow's client it pointed at
    ./mlruns/0 in whatever folder the first run started from, and anything logged there (a notebook's
    bare mlflow.start_run()) scattered an mlruns/ folder into that working directory. Two jobs of a
    sweep that start together may both create it: the one that loses finds it made and goes on."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    try:
        SqlAlchemyStore(uri, artifacts).engine.dispose()
    except Exception:
        if not db.exists():
            raise
