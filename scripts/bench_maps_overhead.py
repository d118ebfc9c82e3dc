#!/usr/bin/env python
"""What attention-map logging costs: the default run (`python -m attnexp train`) with maps on and
off, alternating, several times; medians of fit time and of whole-run wall time.

    python scripts/bench_maps_overhead.py --repeats 3

Prints a table and writes scripts/results/maps_overhead_<device>.json. Target: at most 5%.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]


def run(maps: bool, extra: list[str]) -> dict:
    out = Path(tempfile.mkdtemp(prefix=f"maps-{maps}-"))
    cmd = [sys.executable, "-m", "attnexp", "train", f"maps.enabled={str(maps).lower()}", f"hydra.run.dir={out}",
           "trainer.enable_progress_bar=false", *extra]
    subprocess.run(cmd, cwd=REPO, check=True, capture_output=True)
    return json.loads((out / "summary.json").read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("overrides", nargs="*", help="extra overrides for both arms, e.g. logger=wandb")
    args = ap.parse_args()
    runs = {True: [], False: []}
    for i in range(args.repeats):
        for maps in (False, True) if i % 2 else (True, False):
            s = run(maps, args.overrides)
            runs[maps].append(s)
            print(f"repeat {i} maps={maps}: fit {s['train_time_s']:.1f} s, wall {s['wall_time_s']:.1f} s", flush=True)
    med = {m: {k: statistics.median(r[k] for r in rs) for k in ("train_time_s", "wall_time_s")} for m, rs in runs.items()}
    over = {k: round(100 * (med[True][k] / med[False][k] - 1), 1) for k in ("train_time_s", "wall_time_s")}
    device = runs[True][0]["device"]
    result = {"device": device, "repeats": args.repeats, "overrides": args.overrides, "median_off": med[False],
              "median_on": med[True], "overhead_pct": over,
              "runs": {str(m): [{k: r[k] for k in ("train_time_s", "wall_time_s")} for r in rs] for m, rs in runs.items()}}
    out = REPO / "scripts" / "results"
    out.mkdir(parents=True, exist_ok=True)
    name = f"maps_overhead_{'gpu' if torch.cuda.is_available() else 'cpu'}.json"
    (out / name).write_text(json.dumps(result, indent=2) + "\n")
    print(f"\n{device}, median of {args.repeats}:")
    for key, label in (("train_time_s", "fit "), ("wall_time_s", "wall")):
        print(f"  {label}  {med[False][key]:.1f} s -> {med[True][key]:.1f} s with maps ({over[key]:+.1f}%)")


if __name__ == "__main__":
    main()
