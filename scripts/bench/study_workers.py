#!/usr/bin/env python
"""Workers sharing one Optuna study: K short trials run by W launches side by side (each its own
`python -m attnexp train -m hparams_search=optuna ...` process, threads=1), from the first launch's
start to the last one's end, for each W in --workers, interleaved over --repeats; ratios to W=1 in
one run (this machine is shared and noisy). The study lives in a journal file by default (no server
needed); --storage takes any hydra.sweeper.storage (postgresql+psycopg://...).

    python scripts/bench/study_workers.py --trials 6 --workers 1,2 --repeats 2

The expectation: with W workers a sweep of K trials takes about K/W of one worker's time, as long as
W is at most the cores (here 2). Prints a table and writes scripts/results/study_workers_<device>.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from common import write_results  # noqa: E402

TRIAL = ["trainer.max_epochs=3", "data.n_sentences=1200", "logger=none", "maps.enabled=false", "test=false", "threads=1",
         "trainer.enable_progress_bar=false", "hydra.sweeper.pruner=none", "hydra.sweeper.heartbeat_interval=2"]


def one_sweep(workers: int, trials: int, storage: str | None, folder: Path) -> float:
    """Seconds from the first launch's start to the last launch's end."""
    url = storage or f"journal:{folder / 'study.log'}"
    study = f"w{workers}-{os.getpid()}-{time.time_ns()}"
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    t0 = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-m", "attnexp", "train", "-m", "hparams_search=optuna",
                               f"hydra.sweeper.storage={url}", f"hydra.sweeper.study_name={study}",
                               f"hydra.sweeper.n_trials={trials}", *TRIAL, f"hydra.sweep.dir={folder / f'launch{k}'}"],
                              cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for k in range(workers)]
    for p in procs:
        _, err = p.communicate()
        if p.returncode:
            raise SystemExit(f"a launch failed: {err[-2000:]}")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=6)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--storage", default=None, help="hydra.sweeper.storage (default: a journal file per sweep)")
    ap.add_argument("--out", default=str(REPO / "scripts" / "results"))
    args = ap.parse_args()
    counts = [int(w) for w in args.workers.split(",")]
    times: dict[int, list[float]] = {w: [] for w in counts}
    for r in range(args.repeats):
        for w in counts[r % len(counts):] + counts[:r % len(counts)]:  # interleaved, each first in turn
            with tempfile.TemporaryDirectory() as d:
                s = one_sweep(w, args.trials, args.storage, Path(d))
            times[w].append(round(s, 2))
            print(f"repeat {r}: {w} worker(s), {args.trials} trials: {s:.1f} s", flush=True)
    med = {w: statistics.median(ts) for w, ts in times.items()}
    one = med[counts[0]]
    results = [{"workers": w, "trials": args.trials, "wall_s": times[w], "median_s": round(med[w], 2),
                f"ratio_to_{counts[0]}": round(med[w] / one, 3), "ideal": round(counts[0] / w, 3)} for w in counts]
    meta = {"trials": args.trials, "storage": args.storage or "a journal file per sweep", "cores": os.cpu_count(),
            "repeats": args.repeats, "trial": TRIAL}
    print(write_results(args.out, "study_workers_cpu", meta, results, "Workers sharing one Optuna study",
                        ["workers", "trials", "median_s", f"ratio_to_{counts[0]}", "ideal"]))

if __name__ == "__main__":
    main()
