#!/usr/bin/env python
"""Jobs side by side on one machine: a 2-job sweep (seed=0,1 of the default run) three ways, each
the whole `python -m attnexp train -m ...` command, timed from start to end:

- sequential: Hydra's basic launcher, one job after the other, each with every core;
- parallel, fair share: `hydra/launcher=local_parallel` (submitit, both jobs at once), each job
  with its share of the cores (attnexp sets torch's threads to cores / jobs at once);
- parallel, every core each: the same with `threads=<all cores>`, what every job did before.

    python scripts/bench/parallel_jobs.py --repeats 2

The target: two parallel jobs take about the time of two sequential ones, not several times more.
Prints a table and writes scripts/results/parallel_jobs_<device>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from common import markdown_table  # noqa: E402

CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
ARMS = {
    "sequential": [],
    "parallel, fair share": ["hydra/launcher=local_parallel"],
    "parallel, every core each": ["hydra/launcher=local_parallel", f"threads={CORES}"],
}


def sweep(extra: list[str], overrides: list[str]) -> float:
    with tempfile.TemporaryDirectory() as d:
        cmd = [sys.executable, "-m", "attnexp", "train", "-m", "seed=0,1", "logger=none", "maps.enabled=false",
               "test=false", *overrides, *extra]
        t0 = time.perf_counter()
        r = subprocess.run(cmd, cwd=d, capture_output=True, text=True)
        elapsed = time.perf_counter() - t0
        if r.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
        return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("overrides", nargs="*", default=["trainer.max_epochs=3"], help="overrides for every job")
    args = ap.parse_args()
    times: dict[str, list[float]] = {a: [] for a in ARMS}
    for i in range(args.repeats):
        for arm in (list(ARMS) if i % 2 == 0 else list(ARMS)[::-1]):
            times[arm].append(sweep(ARMS[arm], args.overrides))
            print(f"repeat {i} {arm:>26}: {times[arm][-1]:.1f} s", flush=True)
    med = {a: statistics.median(t) for a, t in times.items()}
    base = med["sequential"]
    result = {"cores": CORES, "repeats": args.repeats, "overrides": args.overrides, "median_s": med,
              "vs_sequential": {a: round(m / base, 2) for a, m in med.items()}, "runs": times}
    out = REPO / "scripts" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "parallel_jobs_cpu.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"\n2 jobs on {CORES} cores, median of {args.repeats}, overrides: {args.overrides}")
    print(markdown_table([[a, f"{m:.1f}", f"{m / base:.2f}x"] for a, m in med.items()], ["launcher", "wall s", "vs sequential"]))


if __name__ == "__main__":
    main()
