#!/usr/bin/env python
"""Induction heads forming, reproduced in attnexp's own model, data and logging (Olsson et al. 2022,
"In-context learning and induction heads"): `experiment=induction_heads` (a 2-layer attention-only
model with rotary positions on repeated random tokens, 64 symbols, 64 tokens, a constant learning
rate, the heads read every 25 steps) with 3 seeds, and the 1-layer control (the same, one layer),
each trained through `python -m attnexp train`; then, across variants, which form induction heads
and when (part `variants`: each with 3 seeds).

What is read: each run's maps/timeline.jsonl and the formations attnexp's change-point search
found (heads.changes: ruptures' PELT and the roles' thresholds, nothing tuned here). The window
where the loss on the repeat drops is taken from the in-context score (late minus early loss on
the probe batch, whose last quarter is inside the repeat): the readings from the first where the
score has made 10% of its total fall to the first where it has made 90%. A formation is "in the
window" when its interval touches it.

    python scripts/studies/induction_formation.py                       # main part (~15 min on 2 cores)
    python scripts/studies/induction_formation.py --parts variants      # ~40 min on 2 cores
    python scripts/studies/induction_formation.py --parts variants --variants "smeared,smeared 1-layer"
    python scripts/studies/induction_formation.py --smoke               # tiny, to check the script

Writes scripts/results/induction_formation_<device>.{json,md} (and _variants) and, from the main
part, images/induction_timeline.png (2 layers, seed 0) and images/induction_control.png (1 layer).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from common import RESULTS, scratch, write_results  # noqa: E402

from attnexp.heads import changes as ch  # noqa: E402
from attnexp.heads import timeline as tl  # noqa: E402

SEEDS = (0, 1, 2)
MAIN = {"2 layers": ["model.n_layers=2"], "1 layer (control)": ["model.n_layers=1"]}
# causal: plain MHA (learned positions); smeared: Olsson et al.'s smeared keys, which they find let one
# layer form an induction head, so it also runs with one layer
VARIANTS = {v: [f"attention={v}"] for v in ("rotary", "causal", "alibi", "differential", "sigmoid", "softpick", "smeared")}
VARIANTS["smeared 1-layer"] = ["attention=smeared", "model.n_layers=1"]


def train(name: str, overrides: list[str], out: Path, steps: int, smoke: bool, preset: str = "induction_heads",
          size: list[str] | None = None) -> dict:
    """One run through the CLI (one thread): its folder, summary and timeline. `size`: the overrides that
    set its length (default: the synthetic preset's training examples for `steps` batches of 32)."""
    if size is None:
        size = ["data.n_train=256", "data.n_val=32", "data.n_test=32", "maps.every_n_steps=2"] if smoke else \
            [f"data.n_train={steps * 32}"]
    cmd = [sys.executable, "-m", "attnexp", "train", f"experiment={preset}", *overrides, "logger=none",
           "trainer.enable_progress_bar=false", "threads=1", "test=false", "maps.animation=false",
           "trainer.val_check_interval=1.0", *size, f"hydra.run.dir={out}"]
    t0 = time.time()
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if r.returncode != 0:
        raise SystemExit(f"{name}: {' '.join(cmd)} failed:\n{r.stderr[-3000:]}")
    summary = json.loads((out / "summary.json").read_text())
    return {"name": name, "dir": out, "summary": summary, "timeline": tl.read(out / "maps" / tl.FILE),
            "wall_s": time.time() - t0}


def window(t: tl.Timeline, least: float = 1.0) -> tuple[int, int, float, float] | None:
    """(first step, last step) of the in-context score's fall (10% .. 90% of it), the score before
    (median of the first 5 readings) and at the end (median of the last 5); None without a fall
    of at least `least` nats."""
    icl, steps = t.scalar("icl"), t.steps
    start, end = float(np.nanmedian(icl[:5])), float(np.nanmedian(icl[-5:]))
    fall = start - end
    if not fall >= least:
        return None
    a = int(np.argmax(icl <= start - 0.1 * fall))
    b = int(np.argmax(icl <= start - 0.9 * fall))
    return int(steps[max(a - 1, 0)]), int(steps[b]), start, end


def row(run: dict, arm: str, seed: int, least: float = 1.0) -> dict:
    t = run["timeline"]
    formed = ch.formations(t)
    w = window(t, least)
    prev = [f for f in formed if f.role == "previous"]
    ind = [f for f in formed if f.role == "induction"]
    inside = (lambda f: w is not None and f.interval[1] >= w[0] and f.interval[0] <= w[1])  # noqa: E731
    icl, plain = t.scalar("icl"), t.scalar("icl_plain")
    plain_cells = ({"icl_plain start": round(float(np.nanmedian(plain[:5])), 2),
                    "icl_plain end": round(float(np.nanmedian(plain[-5:])), 2)} if np.isfinite(plain).any() else {})
    return {"arm": arm, "seed": seed, "steps": int(t.steps[-1]), "readings": len(t.readings),
            "icl start": round(float(np.nanmedian(icl[:5])), 2), "icl end": round(float(np.nanmedian(icl[-5:])), 2),
            **plain_cells,
            "drop window": f"{w[0]}-{w[1]}" if w else "no drop",
            "previous-token heads": ", ".join(f"L{f.layer}H{f.head}@{f.step}" for f in prev) or "none",
            "induction heads": ", ".join(f"L{f.layer}H{f.head}@{f.step}" for f in ind) or "none",
            "other formations": ", ".join(f"L{f.layer}H{f.head} {f.role}@{f.step}" for f in formed
                                          if f.role not in ("previous", "induction")) or "none",
            "run-level changes": ", ".join(f"{c.name}@{c.step}" for c in ch.changes(t)) or "none",
            "first induction": min((f.step for f in ind), default=None),
            "formations in window": f"{sum(map(inside, prev + ind))}/{len(prev + ind)}" if prev + ind else "-",
            "val/loss": round(run["summary"]["metrics"]["final"].get("val/loss", float("nan")), 3),
            "wall s": round(run["wall_s"], 1)}


def run_all(jobs: list[tuple[str, list[str], int]], root: Path, steps: int, smoke: bool, workers: int,
            **kw) -> list[tuple]:
    def one(job):
        arm, ov, seed = job
        out = root / f"{re.sub(r'[^a-z0-9]+', '-', arm.lower()).strip('-')}-s{seed}"  # no comma: Hydra would sweep it
        return job, train(f"{arm} seed {seed}", [*ov, f"seed={seed}"], out, steps, smoke, **kw)

    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(one, jobs))


def part_main(args, root: Path, out: Path, meta: dict) -> None:
    """2 layers against the 1-layer control, 3 seeds each; the pictures of seed 0."""
    jobs = [(arm, ov, seed) for arm, ov in MAIN.items() for seed in SEEDS]
    done = run_all(jobs, root, args.steps, args.smoke, args.workers)
    rows = [row(run, arm, seed) for (arm, _, seed), run in done]
    wall = round(sum(r["wall s"] for r in rows), 1)
    table = write_results(out, f"induction_formation_{meta['device']}", {**meta, "wall_s": wall},
                          rows, "Induction heads forming: 2 layers against the 1-layer control",
                          [c for c in rows[0] if c not in ("first induction",)],
                          note="Each run: `python -m attnexp train experiment=induction_heads seed=S model.n_layers=L` "
                               "(rotary, attention-only, 64 symbols, 64 tokens, batch 32, constant lr 1e-3), read "
                               "every 25 steps. `@step`: where attnexp's change-point search dates the formation. "
                               "icl: the in-context score (late minus early loss, nats) at the start and the end.")
    print(table)
    images = out / "images"
    images.mkdir(parents=True, exist_ok=True)
    for (arm, _, seed), run in done:
        if seed == 0 and not args.smoke:
            name = "induction_timeline.png" if arm == "2 layers" else "induction_control.png"
            shutil.copyfile(run["dir"] / "maps" / "timeline.png", images / name)


def variant_summary(rows: list[dict]) -> list[dict]:
    """A row a variant: how many seeds formed an induction head, and when (mean +- std)."""
    summary = []
    for v in [v for v in VARIANTS if any(r["arm"] == v for r in rows)]:
        mine = [r for r in rows if r["arm"] == v]
        firsts = [r["first induction"] for r in mine if r["first induction"] is not None]
        spread = statistics.stdev(firsts) if len(firsts) > 1 else 0
        summary.append({"variant": v, "seeds with an induction head": f"{len(firsts)}/{len(mine)}",
                        "first induction step (mean ± std)": f"{statistics.mean(firsts):.0f} ± {spread:.0f}" if firsts else "-",
                        "steps": ", ".join(str(f) for f in firsts),
                        "icl end (mean)": round(statistics.mean(r["icl end"] for r in mine), 2)})
    return sorted(summary, key=lambda s: (s["steps"] == "", float(s["first induction step (mean ± std)"].split()[0])
                                          if s["steps"] else 0))


def part_variants(args, root: Path, out: Path, meta: dict) -> None:
    """Each variant (or those --variants names), 3 seeds; rows of the others kept from the earlier file."""
    chosen = args.variants.split(",") if args.variants else list(VARIANTS)
    unknown = [v for v in chosen if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"--variants: {unknown} not among {list(VARIANTS)}")
    done = run_all([(v, VARIANTS[v], seed) for v in chosen for seed in SEEDS], root, args.steps, args.smoke, args.workers)
    rows = [row(run, arm, seed) for (arm, _, seed), run in done]
    earlier = out / f"induction_formation_variants_{meta['device']}.json"
    if args.variants and earlier.is_file():  # the other variants' rows from the earlier call, kept
        rows = [r for r in json.loads(earlier.read_text())["runs"] if r["arm"] not in chosen] + rows
    table = write_results(out, f"induction_formation_variants_{meta['device']}", {**meta, "runs": rows}, variant_summary(rows),
                          "Which variants form induction heads, and when (3 seeds each)",
                          note="`python -m attnexp train experiment=induction_heads attention=V seed=S`; causal "
                               "(plain MHA) and the variants that do not encode positions get learned absolute positions "
                               "(model.pos_emb=auto). Sorted by the mean first induction step.")
    print(table)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", default="main", help="main,variants")
    ap.add_argument("--steps", type=int, default=1000, help="training steps a run (batch 32)")
    ap.add_argument("--workers", type=int, default=2, help="runs at once (each on one thread)")
    ap.add_argument("--variants", default="", help="variants part: only these (comma-separated; the others' rows "
                                                 "are kept from the earlier result file)")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--out", default=None, help="default: scripts/results")
    args = ap.parse_args()
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    out = Path(args.out or RESULTS)
    with scratch("induction-") as root:
        meta = {"device": device, "torch": torch.__version__, "steps": args.steps, "seeds": list(SEEDS),
                "preset": "experiment=induction_heads", "smoke": args.smoke}
        if "main" in args.parts.split(","):
            part_main(args, root, out, meta)
        if "variants" in args.parts.split(","):
            part_variants(args, root, out, meta)


if __name__ == "__main__":
    main()
