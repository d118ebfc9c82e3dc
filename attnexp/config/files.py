"""One reading rule for a file from outside this process (a run folder's summary.json, a .env, a
study's journal): opened without blocking (a named pipe would wait for a writer for ever), used only
if it is a regular file, its size checked on the open descriptor before a byte is read, JSON parsed
within a nesting limit. One writing rule for a file attnexp appends to or writes in a folder it did
not just make (a run folder may be a stranger's): opened without following a link (O_NOFOLLOW),
without blocking, and written only if it is a regular file (`append_text`, `open_to_write`). Every
failure is FileRefused with the reason in a few words, for the caller's one line."""

from __future__ import annotations

import errno
import json
import os
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote


class FileRefused(ValueError):
    """A file that is not read, and why (a few words); `size` when it was refused for its size."""

    def __init__(self, why: str, size: int | None = None):
        super().__init__(why)
        self.size = size


MAX_JSON_DEPTH = 64  # a summary.json nests 4 deep; 100,000 deep was a RecursionError traceback


@contextmanager
def regular(path: Path | str):
    """The open descriptor of a regular file (opened without blocking, checked by fstat on that
    descriptor, so the file cannot change in between) and its size; FileRefused otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise FileRefused("no such file") from None
    except OSError as e:
        raise FileRefused(f"unreadable ({e.strerror or type(e).__name__})") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise FileRefused("a folder, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise FileRefused("not a regular file (a pipe, a device or a socket)")
        yield fd, st.st_size
    except OSError as e:
        raise FileRefused(f"unreadable ({e.strerror or type(e).__name__})") from None
    finally:
        os.close(fd)


def open_to_write(path: Path | str, append: bool = False) -> int:
    """A descriptor to write `path` by the writing rule (the module docstring), made if absent
    (0o644), emptied first unless `append`; FileRefused where the name is a link, a folder, a pipe
    or anything but a regular file (nothing is then written, and the file there is left as it is)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | (os.O_APPEND if append else 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        why = {errno.ELOOP: "a symbolic link (not followed)", errno.EISDIR: "a folder, not a file",
               errno.ENXIO: "not a regular file (a pipe, a device or a socket)"}.get(e.errno)
        if why is None:  # a read-only or full disk, a missing folder: the caller's OSError, as any write's
            raise
        raise FileRefused(why) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise FileRefused("not a regular file (a pipe, a device or a socket)")
        if not append:
            os.ftruncate(fd, 0)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def append_text(path: Path | str, text: str) -> None:
    """Append `text` to `path` by the writing rule, in one write (readers see whole lines)."""
    fd = open_to_write(path, append=True)
    try:
        data = text.encode("utf-8")
        while data:
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)


def check_replaceable(path: Path | str) -> None:
    """FileRefused unless `path` is absent or a regular file (not followed where it is a link): what a
    whole-file write (config.paths.whole) may replace."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise FileRefused("a symbolic link (not replaced)")
    if stat.S_ISDIR(st.st_mode):
        raise FileRefused("a folder, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise FileRefused("not a regular file (a pipe, a device or a socket)")


def read_bytes(path: Path | str, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, or FileRefused."""
    with regular(path) as (fd, size):
        if size > limit:
            raise FileRefused(f"{size:,} bytes, over the {limit:,} such a file may hold", size)
        chunks, left = [], limit + 1
        while left > 0:  # a file that grows while it is read stops at the limit
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    data = b"".join(chunks)
    if len(data) > limit:
        raise FileRefused(f"over the {limit:,} bytes such a file may hold")
    return data


def read_text(path: Path | str, limit: int) -> str:
    try:
        return read_bytes(path, limit).decode("utf-8")
    except UnicodeDecodeError as e:
        raise FileRefused(f"not UTF-8 text (byte {e.start})") from None


def nesting(text: str) -> int:
    """How deep JSON text nests (brackets outside strings), counted before it is parsed."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            escaped = not escaped and ch == "\\"
            in_string = escaped or ch != '"'
            continue
        if ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def read_json(path: Path | str, limit: int, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """A JSON file read by the rule above, nested at most `max_depth` deep; NaN and Infinity refused."""
    text = read_text(path, limit)
    if nesting(text) > max_depth:
        raise FileRefused(f"nested over {max_depth} deep")
    return loads(text)


def loads(text: str) -> Any:
    def constant(name: str):
        raise FileRefused(f"holds {name}, which is not JSON")

    try:
        return json.loads(text, parse_constant=constant)
    except (ValueError, RecursionError) as e:
        if isinstance(e, FileRefused):
            raise
        raise FileRefused(f"not valid JSON ({str(e).splitlines()[0][:80] if str(e) else type(e).__name__})") from None


SQLITE = "sqlite:///"


def sqlite_file(url: str) -> Path | None:
    """The file a `sqlite:///FILE` URL names (an Optuna study's, MLflow's store), else None."""
    return Path(url[len(SQLITE):]) if url.startswith(SQLITE) else None


def sqlite_tables(path: Path | str) -> set[str]:
    """The tables of a whole SQLite database file, opened read-only (the file stays byte-identical);
    FileRefused saying what it is otherwise. The one check both attnexp's stores take (an Optuna study
    file, MLflow's mlflow.db): which tables belong in it is each caller's to say."""
    import sqlite3

    with regular(path) as (fd, _):
        head = os.read(fd, 16)
    if head != b"SQLite format 3\x00":
        raise FileRefused("not an SQLite database")
    try:
        with sqlite3.connect(f"file:{quote(str(Path(path).resolve()))}?mode=ro", uri=True) as db:
            ok = db.execute("PRAGMA quick_check").fetchone()[0]
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as e:
        raise FileRefused(f"a damaged SQLite database ({e})") from None
    if ok != "ok":
        raise FileRefused(f"a damaged SQLite database ({ok[:60]})")
    return {t for t in tables if not t.startswith("sqlite_")}

