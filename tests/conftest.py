from __future__ import annotations

from pathlib import Path

from attnexp.cli import compose, conf_dir

CONF = conf_dir()
SHARED = Path(__file__).resolve().parents[1].parent / "shared"


compose_cfg = compose  # exactly as `python -m attnexp train` composes


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))
