from __future__ import annotations

import os
from pathlib import Path

import pytest

from attnexp.cli import compose, conf_dir

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tests never download: a hub name must fail at once, not after retries
CONF = conf_dir()
SHARED = Path(__file__).resolve().parents[1].parent / "shared"


compose_cfg = compose  # exactly as `python -m attnexp train` composes


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


@pytest.fixture(autouse=True)
def _fresh_dynamo_for_flex(request):
    """FlexAttention compiles its call even on the CPU. torch 2.13's dynamo raises a TypeError while
    explaining a recompile when a score_mod that held a tensor (alibi's) is followed by none
    (pytorch/pytorch#176211, fix in PR #184793): each flex test starts from a clean cache."""
    if "flex" in request.node.name:
        import torch

        torch._dynamo.reset()
    yield


def run_of(overrides: list[str], out_dir="unused"):
    """The validated Run that `attnexp train OVERRIDES` would train into `out_dir`."""
    from attnexp.run import load_run

    return load_run(compose(overrides, out_dir))


@pytest.fixture(autouse=True)
def _restore_root_logging():
    """`main(["train", ...])` in-process lets Hydra point the root logger at this test's captured
    stdout; the next test would log into a closed file."""
    import logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
