#!/usr/bin/env python
"""What attention-map logging and the head analysis cost: the default run (`python -m attnexp
train`) and the same as a classifier (`task=classify`), each with maps off, with the maps alone
(no analysis), with the epoch snapshots but no heads timeline (lm), at the default settings (roles
and rollout, the timeline's light readings; a classifier's relevance) and with head importance
on, in an alternating order, several times; medians of fit time and of
whole-run wall time, and each arm's overhead as a ratio to maps off in the same task.

    python scripts/bench/maps_overhead.py --repeats 3
    python scripts/bench/maps_overhead.py --arms lm-off,lm-default logger=wandb
    python scripts/bench/maps_overhead.py --parts      # where the time goes, inside one run
    python scripts/bench/maps_overhead.py --parts --tag _gpt2 --tasks lm model=gpt2 data=synthetic \
        data.length=30 data.max_len=64 data.n_train=160 data.batch_size=8 trainer.max_epochs=2 test=false
                                                       # the same at GPT-2-small's shape (12 x 12 heads, d=768)

On a shared machine whole runs vary by +-15%, more than the few percent in question; --parts
times each piece inside one run per task (all of it on, importance included; add
maps.importance=false for the defaults) and gives each as a share of that run's fit time: the maps
callback's hooks (what the training thread waits for), the analysis, and roles, importance, rollout
and relevance within it, and apart from them the pictures drawn on the drawing thread beside
training (maps.background; `lm-foreground` draws them on the training thread).

Prints a table and writes scripts/results/maps_overhead_<device>.json. Target: the default at
most 5% of fit time; importance is opt-in (maps.importance=true) when it costs more.
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

REPO = Path(__file__).resolve().parents[2]
NO_ANALYSIS = ["maps.roles=false", "maps.rollout=false", "maps.relevance=false"]
ARMS = {  # name -> (task, overrides)
    "lm-off": ("lm", ["maps.enabled=false"]),
    "lm-maps": ("lm", NO_ANALYSIS),
    "lm-no-timeline": ("lm", ["maps.timeline=false"]),  # epoch snapshots only: what the heads timeline adds
    "lm-default": ("lm", []),
    "lm-foreground": ("lm", ["maps.background=false"]),  # the pictures drawn on the training thread
    "lm-importance": ("lm", ["maps.importance=true"]),
    "classify-off": ("classify", ["task=classify", "maps.enabled=false"]),
    "classify-maps": ("classify", ["task=classify", *NO_ANALYSIS]),
    "classify-default": ("classify", ["task=classify"]),
    "classify-importance": ("classify", ["task=classify", "maps.importance=true"]),
}
KEYS = ("train_time_s", "wall_time_s")


def run(overrides: list[str], extra: list[str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="maps-overhead-") as out:
        cmd = [sys.executable, "-m", "attnexp", "train", f"hydra.run.dir={out}", "trainer.enable_progress_bar=false",
               *overrides, *extra]
        subprocess.run(cmd, cwd=REPO, check=True, capture_output=True)
        return json.loads((Path(out) / "summary.json").read_text())


PARTS = {  # what is timed: (module, attribute) -> label
    ("attnexp.training.maps_callback", "AttentionMaps.on_fit_start"): "maps (start snapshot)",
    ("attnexp.training.maps_callback", "AttentionMaps.on_validation_epoch_end"): "maps (each epoch)",
    ("attnexp.training.maps_callback", "AttentionMaps.on_fit_end"): "maps (GIFs and viewer at the end)",
    ("attnexp.training.maps_callback", "AttentionMaps.on_train_batch_end"): "timeline: readings and every step's check",
    ("attnexp.training.maps_callback", "AttentionMaps.timeline_picture"): "drawing thread: timeline pictures",
    ("attnexp.training.maps_callback", "AttentionMaps._draw"): "drawing thread: snapshots' pictures, GIF frames",
    ("attnexp.training.maps_callback", "AttentionMaps.finish_timeline"): "timeline: change points at the end",
    ("attnexp.heads.analysis", "analyse"): "analysis, all of it",
    ("attnexp.heads.roles", "pattern_scores"): "roles: pattern scores",
    ("attnexp.heads.roles", "induction_scores"): "roles: induction scores",
    ("attnexp.heads.importance", "head_importance"): "importance",
    ("attnexp.heads.explain", "rollout"): "rollout",
    ("attnexp.heads.analysis", "relevance"): "relevance",
}


HOOKS = ("maps (start snapshot)", "maps (each epoch)", "maps (GIFs and viewer at the end)",
         "timeline: readings and every step's check")
TRAINING_THREAD = "training thread, all of it"  # what training waits for: the hooks above together


def timed(task_overrides: list[str], extra: list[str]) -> dict:
    """One run in this process with every piece of PARTS timed (its induction forward counts under
    `analysis, all of it`)."""
    import importlib
    import time
    from collections import defaultdict

    from attnexp.api import compose, load_run, train

    spent: dict[str, float] = defaultdict(float)
    undo = []
    for (mod, attr), label in PARTS.items():
        owner = importlib.import_module(mod)
        *path, name = attr.split(".")
        for p in path:
            owner = getattr(owner, p)
        f = getattr(owner, name)

        def wrapper(*a, _f=f, _label=label, **k):
            t0 = time.perf_counter()
            try:
                return _f(*a, **k)
            finally:
                spent[_label] += time.perf_counter() - t0
        setattr(owner, name, wrapper)
        undo.append((owner, name, f))
    try:
        with tempfile.TemporaryDirectory(prefix="maps-parts-") as out:
            s = train(load_run(compose(["trainer.enable_progress_bar=false", "logger=none", "maps.importance=true",
                                        *task_overrides, *extra], Path(out))))
    finally:
        for owner, name, f in undo:
            setattr(owner, name, f)
    fit = s["train_time_s"]
    spent[TRAINING_THREAD] = sum(spent[label] for label in HOOKS)  # the callback's hooks: they do not nest
    return {"fit_s": fit, "epochs": s["epochs"], "seconds": {k: round(v, 3) for k, v in spent.items()},
            "pct_of_fit": {k: round(100 * v / fit, 2) for k, v in spent.items()}}


def parts(extra: list[str], tasks: list[str], tag: str = "") -> None:
    result = {"device": None, "overrides": extra, "tasks": {}}
    for task, ov in (("lm", []), ("classify", ["task=classify"])):
        if task not in tasks:
            continue
        r = timed(ov, extra)
        result["tasks"][task] = r
        print(f"\n{task}: fit {r['fit_s']:.1f} s over {r['epochs']} epochs; share of fit time:")
        for label in [*PARTS.values(), TRAINING_THREAD]:
            if label in r["seconds"]:
                print(f"  {label:36s} {r['seconds'][label]:7.2f} s  {r['pct_of_fit'][label]:6.2f}%")
    import platform

    kind = "cuda" if torch.cuda.is_available() else "cpu"
    result["device"] = f"{kind} ({platform.machine()}, {torch.get_num_threads()} threads)"
    out = REPO / "scripts" / "results" / f"maps_parts_{'gpu' if torch.cuda.is_available() else 'cpu'}{tag}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--parts", action="store_true", help="time each piece inside one run per task instead")
    ap.add_argument("--tasks", default="lm,classify", help="--parts: which of lm, classify")
    ap.add_argument("--tag", default="", help="suffix of the result file")
    ap.add_argument("overrides", nargs="*", help="extra overrides for every arm, e.g. logger=wandb")
    args = ap.parse_args()
    if args.parts:
        return parts(args.overrides, args.tasks.split(","), args.tag)
    arms = args.arms.split(",")
    runs: dict[str, list[dict]] = {a: [] for a in arms}
    for i in range(args.repeats):
        for arm in arms if i % 2 == 0 else arms[::-1]:  # alternate the order: drift on a shared machine cancels
            s = run(ARMS[arm][1], args.overrides)
            runs[arm].append({k: s[k] for k in KEYS})
            print(f"repeat {i} {arm}: fit {s['train_time_s']:.1f} s, wall {s['wall_time_s']:.1f} s", flush=True)
            device = s["device"]
    med = {a: {k: statistics.median(r[k] for r in rs) for k in KEYS} for a, rs in runs.items()}
    over = {}
    for arm in arms:
        base = f"{ARMS[arm][0]}-off"
        if base in med and arm != base:
            over[arm] = {k: round(100 * (med[arm][k] / med[base][k] - 1), 1) for k in KEYS}
    result = {"device": device, "repeats": args.repeats, "overrides": args.overrides,
              "arms": {a: ARMS[a][1] for a in arms}, "median": med, "overhead_pct_vs_off": over, "runs": runs}
    out = REPO / "scripts" / "results"
    out.mkdir(parents=True, exist_ok=True)
    name = f"maps_overhead_{'gpu' if torch.cuda.is_available() else 'cpu'}{args.tag}.json"
    (out / name).write_text(json.dumps(result, indent=2) + "\n")
    print(f"\n{device}, median of {args.repeats}; overhead against maps off in the same task:")
    for arm in arms:
        o = over.get(arm)
        print(f"  {arm:20s} fit {med[arm]['train_time_s']:6.1f} s  wall {med[arm]['wall_time_s']:6.1f} s"
              + (f"   fit {o['train_time_s']:+.1f}%  wall {o['wall_time_s']:+.1f}%" if o else ""))


if __name__ == "__main__":
    main()
