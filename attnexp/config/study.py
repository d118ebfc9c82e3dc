"""A study's storage as attnexp names it (hydra.sweeper.storage, `compare storage=`): an SQLite file,
`journal:FILE` (Optuna's JournalStorage on a file) or a database server's URL, parsed once into one
value that the sweeper, its checks, a job's pruning callback and `compare study=` all read."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from attnexp.config.files import sqlite_file
from attnexp.config.secrets import hide_password

JOURNAL = "journal:"


@dataclass(frozen=True)
class StudyStorage:
    """A study's storage, parsed once: `kind` sqlite (`path` the file), journal (`path` the file) or
    server (any other database URL); `url` as configs hold it (the command line took any password out
    into PGPASSWORD: attnexp/config/secrets.py), `shown` for people."""

    url: str
    kind: str
    path: Path | None = None

    @classmethod
    def parse(cls, url) -> StudyStorage | None:
        if not url:
            return None
        url = str(url)
        if url.startswith(JOURNAL):
            return cls(url, "journal", Path(url[len(JOURNAL):]))
        if (path := sqlite_file(url)) is not None:
            return cls(url, "sqlite", path)
        return cls(url, "server")

    @property
    def shown(self) -> str:
        return hide_password(self.url)

    @property
    def postgresql(self) -> bool:
        return self.url.startswith("postgresql")

    def optuna(self, **rdb):
        """What optuna.create_study / load_study take: the URL, an RDBStorage built with `rdb`, or a
        JournalStorage."""
        import optuna

        if self.kind == "journal":
            from optuna.storages.journal import JournalFileBackend

            return optuna.storages.JournalStorage(JournalFileBackend(str(self.path)))
        return optuna.storages.RDBStorage(self.url, **rdb) if rdb else self.url

    def read_only(self):
        """The storage opened for reading only: no table, version row or file is created (an SQLite
        file through its read-only URI, a server's session in read-only transactions); the journal's
        file must exist (Optuna's backend creates a missing one)."""
        import optuna

        if self.kind == "journal":
            return self.optuna()
        url, connect = self.url, {}
        if self.kind == "sqlite":
            url = f"sqlite:///file:{quote(str(self.path.resolve()))}?mode=ro&uri=true"
        elif self.postgresql:
            connect = {"options": "-c default_transaction_read_only=on", "connect_timeout": 5}
        return optuna.storages.RDBStorage(url, skip_table_creation=True, engine_kwargs={"connect_args": connect})
