"""Where things are, and runs composed exactly as `python -m attnexp train` composes them."""

from __future__ import annotations

from pathlib import Path

from attnexp.api import compose, load_run
from attnexp.launch.compose import conf_dir

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"  # ../shared beside the repo: the real 20 Newsgroups and the pretrained model
CONF = conf_dir()
compose_cfg = compose


def options(group: str) -> list[str]:
    """The options of a config group (conf/<group>/*.yaml)."""
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def run_of(overrides: list[str], out_dir="unused"):
    """The validated Run that `attnexp train OVERRIDES` would train into `out_dir`."""
    return load_run(compose(overrides, out_dir))
