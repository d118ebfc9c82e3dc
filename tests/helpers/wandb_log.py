"""Reads an offline wandb run's log (`run-<id>.wandb`), which wandb 0.31 offers no reader for:
a 7-byte header, then LevelDB-style records (crc 4, length 2, type 1, data) in 32 KiB blocks,
each a `wandb_internal_pb2.Record`. Test helper only."""

from __future__ import annotations

import json
import struct
from pathlib import Path

BLOCK, HEADER = 32768, 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path):
    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(path).read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a wandb log"
    pos, chunks = HEADER, b""
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # block trailer padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + HEADER])
        payload = data[pos + HEADER:pos + HEADER + length]
        pos += HEADER + length
        if kind == 0 and length == 0:
            continue
        chunks = payload if kind in (FULL, FIRST) else chunks + payload
        if kind in (FULL, LAST):
            r = pb.Record()
            r.ParseFromString(chunks)
            yield r


def summary(path: Path, wait: float = 20.0) -> dict:
    """What the run holds: its config keys and values, display name, group, job type, tags, exit code,
    history keys.
    wandb's service writes the log on its own: wait (up to `wait` s) until the run's exit is in it."""
    import time

    end = time.time() + wait
    while True:
        try:
            out = _summary(path)
        except Exception:  # a record being written
            out = None
        if (out is not None and out["exit_code"] is not None) or time.time() > end:
            return out if out is not None else _summary(path)
        time.sleep(0.2)


def _summary(path: Path) -> dict:
    out = {"config": {}, "name": None, "group": None, "job_type": None, "tags": [], "exit_code": None, "history": set()}
    for r in records(path):
        kind = r.WhichOneof("record_type")
        if kind == "run":
            out["group"], out["job_type"], out["tags"] = r.run.run_group, r.run.job_type, list(r.run.tags)
            out["name"] = r.run.display_name or out["name"]
            out["config"].update({u.key: json.loads(u.value_json) for u in r.run.config.update})
        elif kind == "config":
            out["config"].update({u.key: json.loads(u.value_json) for u in r.config.update})
        elif kind == "history":
            out["history"] |= {i.key or "/".join(i.nested_key) for i in r.history.item}
        elif kind == "exit":
            out["exit_code"] = r.exit.exit_code
    return out
