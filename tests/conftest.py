from __future__ import annotations

from pathlib import Path

from attnexp.cli import compose, conf_dir

CONF = conf_dir()
SHARED = Path(__file__).resolve().parents[1].parent / "shared"


def compose_cfg(overrides: list[str], out_dir: Path | str = "unused"):
    """Compose exactly as `python -m attnexp train` does (attnexp.cli.compose)."""
    return compose(overrides, out_dir)


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))
