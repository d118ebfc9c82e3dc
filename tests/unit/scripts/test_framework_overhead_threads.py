"""scripts/bench/framework_overhead.py's arms that build their own loop (plain, bare, nanogpt) set up the
run as attnexp's fit.prepare does, threads included: the nanoGPT arm kept torch's default while the
attnexp arms got `threads=`, so the comparison was of thread counts (issue 65 item 7)."""

from __future__ import annotations

import sys

import torch

from helpers.runs import REPO


def test_the_own_loop_arms_take_the_runs_threads(tmp_path):
    sys.path.insert(0, str(REPO / "scripts" / "bench"))
    sys.path.insert(0, str(REPO / "scripts"))
    import framework_overhead

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        run, *_ = framework_overhead._setup(["threads=1", "data.n_sentences=100", "logger=none"], tmp_path)
        assert run.threads == 1 and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
