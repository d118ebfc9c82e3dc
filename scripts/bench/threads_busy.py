#!/usr/bin/env python
"""A short run's training time when another process keeps one core busy, under each thread setting:
attnexp's default (`threads=null`: the cores left free when the run starts), a thread a core
(`threads=<cores>`, torch's own default: OpenMP threads spinning while they wait), the same with
`OMP_WAIT_POLICY=PASSIVE` (waiting threads sleep), and `threads=1`; beside the same runs with every
core free.

    python scripts/bench/threads_busy.py --repeats 3

Each run is `python -m attnexp train` in a fresh process (OpenMP reads its settings once, at start).
Prints a table; writes scripts/results/threads_busy_cpu.json (medians, ratios to a thread a core, free).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from common import RESULTS, markdown_table  # noqa: E402

RUN = ["trainer.max_epochs=3", "data.n_sentences=1500", "logger=none", "maps.enabled=false", "test=false",
       "trainer.enable_progress_bar=false"]
CORES = os.cpu_count() or 1
ARMS = {"default (free cores)": ({}, []), "a thread a core": ({}, [f"threads={CORES}"]),
        "a thread a core, passive": ({"OMP_WAIT_POLICY": "PASSIVE"}, [f"threads={CORES}"]), "threads=1": ({}, ["threads=1"])}


def one(env: dict, overrides: list[str]) -> float:
    env = {**os.environ, **env}
    env.pop("OMP_NUM_THREADS", None)  # torch's own default, not a caller's setting
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([sys.executable, "-m", "attnexp", "train", *RUN, *overrides, f"hydra.run.dir={d}"], cwd=REPO,
                       env=env, check=True, capture_output=True, timeout=1800)
        return json.loads((Path(d) / "summary.json").read_text())["train_time_s"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args()
    times: dict[str, list[float]] = {}
    for i in range(args.repeats):
        for busy in (False, True):
            hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
            try:
                for arm, (env, overrides) in ARMS.items():
                    key = f"{arm}, {'one core busy' if busy else 'cores free'}"
                    times.setdefault(key, []).append(one(env, overrides))
                    print(f"repeat {i} {key}: {times[key][-1]:.2f} s", flush=True)
            finally:
                if hog is not None:
                    hog.kill()
                    hog.wait()
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med["a thread a core, cores free"]
    result = {"cores": os.cpu_count(), "repeats": args.repeats, "run": RUN, "median_train_s": med,
              "vs_a_thread_a_core_free": {k: round(v / base, 3) for k, v in med.items()}, "runs": times}
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "threads_busy_cpu.json").write_text(json.dumps(result, indent=2) + "\n")
    print(markdown_table([[k, f"{v:.2f}", f"{v / base:.2f}x"] for k, v in med.items()],
                         ["threads", "train s (median)", "vs a thread a core, cores free"]))


if __name__ == "__main__":
    main()
