"""Fixtures for every test (helpers live in tests/helpers/, imported by name)."""

from __future__ import annotations

import os

import pytest

pytest_plugins = ["helpers.forged"]  # the `trained` checkpoint fixture, shared by the bad-input test files

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tests never download: a hub name must fail at once, not after retries


def pytest_configure(config):
    """Under pytest-xdist (`-n 2`, as CI runs), each worker gets its share of the cores: torch's
    default (every core, in each of the workers) oversubscribes them, and OpenMP threads then wait
    on each other. The CLI subprocesses the tests start inherit it (OMP_NUM_THREADS)."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers:
        share = max(1, (os.cpu_count() or 1) // int(workers))
        os.environ["OMP_NUM_THREADS"] = str(share)
        import torch

        torch.set_num_threads(share)


@pytest.fixture(autouse=True)
def _fresh_dynamo_for_flex(request):
    """FlexAttention compiles its call even on the CPU. torch 2.13's dynamo raises a TypeError while
    explaining a recompile when a score_mod that held a tensor (alibi's) is followed by none
    (pytorch/pytorch#176211, fix in PR #184793): each flex test starts from a clean cache."""
    if "flex" in request.node.name:
        import torch

        torch._dynamo.reset()
    yield


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


@pytest.fixture(autouse=True)
def _last_checkpoint_is_the_newest_state(request):
    """In every run folder a test leaves under its tmp_path, a completed run's checkpoints/last.ckpt
    holds its last step (Lightning's save_last once left it at the last *best* epoch)."""
    yield
    tmp = request.node.funcargs.get("tmp_path")
    if tmp is not None:
        from helpers.runs import stale_last_checkpoints

        stale = stale_last_checkpoints(tmp)
        assert not stale, f"last.ckpt older than the run's last step: {stale}"
