"""Text files read as data (a corpus, 20 Newsgroups' local files), checked before a library parses
them: UTF-8, not binary, not empty; a one-line ConfigError that says what the file is instead."""

from __future__ import annotations

import codecs
from pathlib import Path

from attnexp.config import ConfigError, check


def utf8_problem(path: str | Path) -> str | None:
    """Why a text file (gzipped if it ends in .gz) is not UTF-8 text, in a few words, or None: read in
    1 MiB chunks, so a large file is never held twice. Every text file attnexp reads as data (a
    corpus, 20 Newsgroups' local files) is checked this way before a library parses it."""
    import gzip

    decoder, line = codecs.getincrementaldecoder("utf-8")(), 1
    with (gzip.open if str(path).endswith(".gz") else open)(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            if b"\0" in chunk:
                return "binary: it holds NUL bytes"
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError as e:
                at = line + chunk[: max(e.start, 0)].count(b"\n")
                return f"line {at}: {e.reason}"
            line += chunk.count(b"\n")
    return None


def not_utf8(path: str | Path, key: str, problem: str) -> ConfigError:
    if problem.startswith("binary"):
        return ConfigError(f"{key}={str(path)!r} looks binary (it holds NUL bytes); give a UTF-8 text file")
    return ConfigError(f"{key}={str(path)!r} is not UTF-8 text ({problem}); convert it first, "
                       f"e.g. iconv -f latin1 -t utf-8 IN > OUT")


def check_text_file(path: str, key: str) -> None:
    """A readable, non-empty UTF-8 text file, or a ConfigError that says what it is instead."""
    p = Path(path)
    check(p.exists(), f"{key}={path!r}: no such file; give a path to a UTF-8 text file (one sentence per line), "
                      f"or {key}=null for the built-in corpus")
    check(p.is_file(), f"{key}={path!r} is a folder; give a UTF-8 text file (one sentence per line)")
    problem = utf8_problem(p)
    if problem:
        raise not_utf8(path, key, problem)
    with open(p, "rb") as f:
        has_text = any(chunk.strip() for chunk in iter(lambda: f.read(1 << 20), b""))
    check(has_text, f"{key}={path!r} is empty; give a text file with one sentence per line")
