"""The one writing rule (attnexp.config.files): a file attnexp appends to or writes in a folder it did
not just make is written only if it is a regular file, never through a symbolic link, and a named pipe
is never waited on. An attack pass found `eval split=test` appending to whatever file a run folder's
symlinked test_reads.jsonl named (issue 67 item 1): each writer now goes through `append_text`,
`open_to_write` or `config.paths.whole`, and a test here plants a link, a pipe and a folder at each path."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import pytest

from attnexp.config import ConfigError, layout
from attnexp.config.files import FileRefused, append_text
from attnexp.config.paths import write_whole

PLANTS = ("link", "pipe", "folder")


def plant(path: Path, kind: str, outside: Path) -> None:
    """A symbolic link to `outside` (a file with known bytes), a named pipe, or a folder at `path`."""
    outside.write_text("theirs\n")
    if kind == "link":
        path.symlink_to(outside)
    elif kind == "pipe":
        os.mkfifo(path)
    else:
        path.mkdir()


def untouched(path: Path, kind: str, outside: Path) -> bool:
    kept = {"link": path.is_symlink(), "pipe": path.is_fifo(), "folder": path.is_dir() and not path.is_symlink()}[kind]
    return kept and outside.read_text() == "theirs\n"


@pytest.mark.parametrize("kind", PLANTS)
def test_the_helpers_refuse_a_link_a_pipe_and_a_folder_and_leave_them_as_they_are(tmp_path, kind):
    path, outside = tmp_path / "file", tmp_path / "elsewhere.txt"
    plant(path, kind, outside)
    with pytest.raises(FileRefused):
        append_text(path, "mine\n")
    with pytest.raises(ConfigError, match=r"file is .*; attnexp writes only regular files there"):
        write_whole(path, "mine\n")
    assert untouched(path, kind, outside)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere.txt", "file"]  # no temporary file left


def test_a_regular_file_is_appended_to_and_replaced_whole(tmp_path):
    path = tmp_path / "file"
    append_text(path, "a\n")
    append_text(path, "b\n")
    assert path.read_text() == "a\nb\n"
    write_whole(path, "c\n")
    assert path.read_text() == "c\n"


@pytest.mark.parametrize("kind", PLANTS)
def test_an_evals_test_read_is_not_noted_through_a_planted_ledger(tmp_path, kind, caplog):
    """`eval split=test` of a stranger's run folder whose test_reads.jsonl is a link appended a line to the
    file it named; now the read is said not to be noted, in one line, and the file there is left alone."""
    from attnexp.training.evaluate import noted_in_run

    run = tmp_path / "run"
    (run / layout.CHECKPOINTS).mkdir(parents=True)
    (run / layout.SUMMARY).write_text("{}")
    outside = tmp_path / "outside.txt"
    plant(run / layout.TEST_READS, kind, outside)
    with caplog.at_level(logging.WARNING, logger="attnexp"):
        assert noted_in_run(run / layout.CHECKPOINTS / "last.ckpt") is None
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == [f"the test read is not noted in {run.resolve()}"]
    assert untouched(run / layout.TEST_READS, kind, outside)


@pytest.mark.parametrize("kind", PLANTS)
def test_a_timeline_whose_file_is_planted_stops_in_one_line(tmp_path, kind):
    import numpy as np

    from attnexp.heads import timeline as tl

    path, outside = tmp_path / tl.FILE, tmp_path / "outside.txt"
    w = tl.Writer(path)
    w.start(keep_through=None)
    w.append(tl.Reading(0, 0, {"x": np.zeros((1, 1))}))
    path.unlink()
    plant(path, kind, outside)
    with pytest.raises(tl.TimelineError, match="this run goes on without a timeline"):
        w.append(tl.Reading(1, 0, {"x": np.zeros((1, 1))}))
    assert untouched(path, kind, outside)


@pytest.mark.parametrize("kind", PLANTS)
def test_a_sweeps_refusal_is_not_appended_through_a_planted_file(tmp_path, kind):
    from attnexp.cli.sweep_end import say_refused

    outside = tmp_path / "outside.txt"
    plant(tmp_path / layout.REFUSED, kind, outside)
    say_refused(tmp_path / "job", tmp_path, RuntimeError("another run's folder"))
    assert untouched(tmp_path / layout.REFUSED, kind, outside)


@pytest.mark.parametrize("kind", PLANTS)
def test_a_runs_resolved_config_is_not_written_through_a_planted_file(tmp_path, kind):
    from attnexp.api import compose, load_run
    from attnexp.training.fit import prepare

    out = tmp_path / "run"
    out.mkdir()
    outside = tmp_path / "outside.txt"
    plant(out / layout.CONFIG, kind, outside)
    run = load_run(compose(["data.n_sentences=100", "logger=none"], out))
    with pytest.raises(ConfigError, match=re.escape(layout.CONFIG)):
        prepare(run)
    assert untouched(out / layout.CONFIG, kind, outside)


PACKAGE = Path(__file__).resolve().parents[3]
HELPERS = {"attnexp/config/files.py", "attnexp/config/paths.py"}


def test_no_writer_outside_the_helpers_appends_or_writes_a_path_in_place():
    """`open(..., "a")` (or "w", "x") and `.write_text(` / `.write_bytes(` appear only in the helpers, or
    on the temporary path `whole` hands out (`tmp`), which no one else can have planted (render.write_bytes
    is `whole` around it)."""
    found = []
    for root in ("attnexp", "hydra_plugins"):
        for p in sorted((PACKAGE / root).rglob("*.py")):
            rel = p.relative_to(PACKAGE).as_posix()
            if rel in HELPERS:
                continue
            for i, line in enumerate(p.read_text().splitlines(), 1):
                if re.search(r"""\bopen\((?!tmp\b)[^)]*["'][awx]b?["']""", line) or \
                        re.search(r"(?<!\btmp)(?<!\brender)\.write_(text|bytes)\(", line):
                    found.append(f"{rel}:{i}: {line.strip()}")
    assert found == [], "\n".join(found)
