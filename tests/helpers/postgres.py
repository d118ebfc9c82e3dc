"""A real PostgreSQL server for the tests, started by the test itself: Debian's `postgresql` package
(`.ci/run` installs it), `initdb` in a temporary folder as the unprivileged `postgres` user, a free
port on 127.0.0.1, a password (scram-sha-256), stopped by its PID. `skip_reason()` says why it
cannot start here."""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

PASSWORD = "attnexp-test"


def bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


def skip_reason() -> str | None:
    if bindir() is None:
        return "PostgreSQL is not installed: apt-get install postgresql (.ci/run does)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "runuser is missing: initdb refuses root, and the postgres user cannot be switched to"
    return None


def _as_postgres(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def server():
    """A running server: yields (port, url of its `optuna` database); stopped and removed afterwards."""
    b = bindir()
    home = Path(tempfile.mkdtemp(prefix="attnexp-pg-", dir="/tmp"))
    data, pw = home / "data", home / "pw"
    pw.write_text(PASSWORD + "\n")
    if os.geteuid() == 0:
        shutil.chown(home, "postgres")
        shutil.chown(pw, "postgres")
    subprocess.run(_as_postgres([str(b / "initdb"), "-D", str(data), "-U", "postgres", "--auth-local=trust",
                                 "--auth-host=scram-sha-256", f"--pwfile={pw}"]), check=True, capture_output=True)
    port = free_port()
    proc = subprocess.Popen(_as_postgres([str(b / "postgres"), "-D", str(data), "-p", str(port), "-k", str(home),
                                          "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=100"]),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        env = {**os.environ, "PGPASSWORD": PASSWORD}
        for _ in range(100):
            if subprocess.run([str(b / "pg_isready"), "-h", "127.0.0.1", "-p", str(port)], capture_output=True).returncode == 0:
                break
            time.sleep(0.2)
        subprocess.run([str(b / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "optuna"], env=env,
                       check=True, capture_output=True)
        yield port, f"postgresql+psycopg://postgres:{PASSWORD}@127.0.0.1:{port}/optuna"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGINT)  # PostgreSQL's fast shutdown
            proc.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(home, ignore_errors=True)


def sql(port: int, database: str, statement: str) -> None:
    """One statement through psql, as the postgres user over TCP."""
    subprocess.run([str(bindir() / "psql"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-d", database, "-c",
                    statement], env={**os.environ, "PGPASSWORD": PASSWORD}, check=True, capture_output=True)
