"""scripts/bench/step_profile.py reduces a torch.profiler Chrome trace to a few numbers a step; here
on a planted trace whose answers are known."""

from __future__ import annotations

import importlib.util

from helpers.runs import REPO


def step_profile():
    spec = importlib.util.spec_from_file_location("step_profile", REPO / "scripts" / "bench" / "step_profile.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def x(name, cat, ts, dur, tid=1):
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": 1, "tid": tid}


def test_a_planted_trace_gives_its_busy_share_gaps_syncs_and_self_times():
    events = [
        x("ProfilerStep#1", "user_annotation", 0, 100), x("ProfilerStep#2", "user_annotation", 100, 100),
        x("aten::mm", "cpu_op", 10, 30), x("cudaLaunchKernel", "cuda_runtime", 12, 5),  # inside aten::mm
        x("cudaMemcpyAsync", "cuda_runtime", 50, 2), x("cudaStreamSynchronize", "cuda_runtime", 60, 10),
        x("collate", "cpu_op", 120, 60),
        x("gemm", "kernel", 20, 40, tid=7), x("gemm", "kernel", 50, 30, tid=8),  # overlapping: busy 20..80
        x("Memcpy HtoD", "gpu_memcpy", 190, 10, tid=7),  # busy 190..200; the gap 80..190 is the host's collate
    ]
    s = step_profile().summarise(events)
    assert s["steps"] == 2 and s["host_ms_per_step"] == 0.1
    assert s["gpu_busy_pct"] == 35.0  # (60 + 10) of 200 us
    assert s["syncs_per_step"] == 0.5  # the stream sync; not cudaMemcpyAsync
    gap = s["top_gaps"][0]
    assert gap["gap_us"] == 110 and gap["after_kernel"] == "gemm" and gap["before_kernel"] == "Memcpy HtoD"
    assert gap["host_doing"][0] == "ProfilerStep#1"  # the innermost op running at 80 us
    self_us = {o["op"]: o["self_us_per_step"] for o in s["top_host_ops"]}
    assert self_us["aten::mm"] == 12.5 and self_us["collate"] == 30  # mm: 30 less its 5 us launch, over 2 steps
    assert self_us["(Python, in no op)"] == (200 - 30 - 2 - 10 - 60) / 2
