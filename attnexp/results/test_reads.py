"""Each read of a run's test split, one JSON line appended to <run>/test_reads.jsonl: by which call
(`train test=true`, or `attnexp eval split=test` of one of the run's checkpoints), the checkpoint,
the command, when. "The test split was read once" is then a fact of the run folder, not of a
study's prose: scripts/common.provenance copies the lines of every run a result file quotes.

Written by attnexp alone, into the run's own folder; read as a stranger's file (size-bounded, one
object a line, anything else skipped)."""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

from attnexp.config import layout
from attnexp.config.files import append_text

MAX_BYTES = 1 << 20  # ~5,000 reads; a larger file is not an attnexp ledger


def note(run_dir: Path | str, by: str, checkpoint: Path | str | None) -> None:
    """Append one read of `run_dir`'s test split (a single write: readers see whole lines)."""
    from attnexp.config.secrets import hide_password

    line = {"at": time.strftime("%Y-%m-%dT%H:%M:%S"), "by": by,
            "checkpoint": Path(checkpoint).name if checkpoint else None,
            "command": hide_password(" ".join(sys.argv[:1] + [shlex.quote(a) for a in sys.argv[1:]]))}
    append_text(Path(run_dir) / layout.TEST_READS, json.dumps(line) + "\n")  # a link or pipe there: FileRefused


def read(run_dir: Path | str) -> list[dict]:
    """The reads `run_dir` records, oldest first ([] where none is recorded or the file is not one)."""
    from attnexp.config.files import FileRefused, loads, read_text

    try:
        text = read_text(Path(run_dir) / layout.TEST_READS, MAX_BYTES)
    except FileRefused:
        return []
    reads = []
    for line in text.splitlines():
        try:
            r = loads(line)
        except ValueError:
            continue
        if isinstance(r, dict) and isinstance(r.get("by"), str):
            reads.append({k: r.get(k) for k in ("at", "by", "checkpoint", "command")})
    return reads


def run_of(checkpoint: Path | str) -> Path | None:
    """The run folder a checkpoint was saved in (<run>/checkpoints/x.ckpt), or None."""
    folder = Path(checkpoint).resolve().parent
    return folder.parent if folder.name == layout.CHECKPOINTS and (folder.parent / layout.SUMMARY).is_file() else None
