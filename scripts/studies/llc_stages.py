#!/usr/bin/env python
"""The local learning coefficient's stages beside the heads' formations (Hoogland et al. 2024, "The
Developmental Landscape of In-Context Learning"): `maps.llc=true` on the synthetic induction preset
(`experiment=induction_heads`, 1,500 steps) and on the text preset (`experiment=induction_text`,
20,000 steps), 3 seeds each, every run through `python -m attnexp train`.

Per run, read from its maps/timeline.jsonl and summary.json (attnexp's own estimates and change
points, nothing tuned here): the LLC at its 16 readings (devinterp's SGLD, the settings of
scripts/studies/llc_calibration.py), the LLC's stages and their boundaries (heads.llc: its critical
points, a rise or fall counting from 2.0), the heads' formations and the in-context score's drop
window (as scripts/studies/induction_formation.py reads them), and where each LLC boundary lies
against that window: before it, inside it (within the LLC readings either side of it), or after it.

    python scripts/studies/llc_stages.py            # ~25 min on 2 cores (2 runs at a time)
    python scripts/studies/llc_stages.py --smoke    # tiny, to check the script
    python scripts/studies/llc_stages.py --variants alibi,smeared,causal,differential,softpick,sigmoid
                                                    # the synthetic arm for other variants, ~35 min

Writes scripts/results/llc_stages_<device>.{json,md} and images/llc_synthetic_timeline.png and
images/llc_text_timeline.png (seed 0 of each); with --variants, llc_stages_<device>_variants.{json,md}
(the synthetic arm, `attention=V`, 3 seeds a variant; no pictures).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO / "scripts" / "studies"))

from common import RESULTS, scratch, write_results  # noqa: E402
from induction_formation import SEEDS, row, run_all  # noqa: E402

PRESETS = {  # arm: (preset, steps, the overrides that set its length, the in-context fall that counts)
    "synthetic": ("induction_heads", 1500, ["data.n_train=48000"], 1.0),
    "text": ("induction_text", 20000, ["trainer.max_steps=20000", "trainer.val_check_interval=1000"], 0.3),
}
SMOKE = {"synthetic": ["data.n_train=256", "data.n_val=32", "data.n_test=32", "maps.every_n_steps=2"],
         "text": ["data.limit=200", "trainer.max_steps=40", "maps.every_n_steps=5", "trainer.val_check_interval=20"]}


def where(boundary: int, llc_steps: list[int], window: tuple[int, int] | None) -> str:
    """A boundary against the drop window, at the resolution of the LLC's readings."""
    if window is None:
        return "no drop"
    i = llc_steps.index(boundary)
    lo, hi = llc_steps[max(0, i - 1)], llc_steps[min(len(llc_steps) - 1, i + 1)]
    return "before" if hi < window[0] else "after" if lo > window[1] else "inside"


def llc_row(run: dict, arm: str, seed: int, least: float) -> dict:
    from induction_formation import window

    from attnexp.heads import llc

    t = run["timeline"]
    base = row(run, arm, seed, least=least)
    x = t.scalar("llc")
    read = [int(s) for s, v in zip(t.steps, x) if v == v]
    found = llc.stages(t.steps, x)
    w = window(t, least)
    bounds = [s.start for s in found[1:]]
    said = run["summary"]["attention_maps"]["timeline"].get("llc", {})
    return {"arm": arm, "seed": seed, "steps": base["steps"], "drop window": base["drop window"],
            "previous-token heads": base["previous-token heads"], "induction heads": base["induction heads"],
            "LLC at readings": ", ".join(f"{s}:{v:.1f}" for s, v in zip(read, x[x == x])),
            "LLC stages": ", ".join(f"{s.kind} {s.start}-{s.end}" for s in found) or "-",
            "LLC boundaries": ", ".join(f"{b} ({where(b, read, w[:2] if w else None)})" for b in bounds) or "none",
            "LLC s": said.get("seconds"), "estimates": said.get("estimates"), "unsettled": said.get("unsettled"),
            "wall s": base["wall s"]}


def docs_rows(path: Path | None = None) -> str:
    """docs/maps.md's table rows, from the result file (a test holds the page to them)."""
    import json

    rows = json.loads((path or RESULTS / "llc_stages_cpu.json").read_text())["results"]
    return "\n".join(f"| {r['arm']} | {r['seed']} | {r['drop window'].replace('-', '–')} | {r['induction heads']} | "
                     f"{r['LLC stages'].replace('-', '–')} | {r['LLC boundaries']} |" for r in rows)


def variant_rows(path: Path | None = None) -> str:
    """docs/maps.md's table of the LLC across variants, a row a variant, from the --variants file: seeds
    with an induction head, drop windows, the last estimate's range, each seed's LLC boundaries, and
    how many estimates' chains had not settled."""
    import json
    import re

    rotary = [{**r, "arm": "rotary"} for r in json.loads((RESULTS / "llc_stages_cpu.json").read_text())["results"]
              if r["arm"] == "synthetic"]  # the synthetic arm itself, for comparison
    rows = rotary + json.loads((path or RESULTS / "llc_stages_cpu_variants.json").read_text())["results"]
    out = []
    for v in dict.fromkeys(r["arm"] for r in rows):
        runs = [r for r in rows if r["arm"] == v]
        last = [float(r["LLC at readings"].rsplit(":", 1)[1]) for r in runs]
        bounds = " · ".join(re.sub(r" \([^)]*\)", "", r["LLC boundaries"]) for r in runs)
        windows = " · ".join(r["drop window"].replace("-", "–") for r in runs)
        formed = sum(r["induction heads"] != "none" for r in runs)
        out.append(f"| {v} | {formed}/{len(runs)} | {windows} | {min(last):.1f}–{max(last):.1f} | {bounds} | "
                   f"{sum(r['unsettled'] for r in runs)} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2, help="runs at once (each on one thread)")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--out", default=None, help="default: scripts/results")
    ap.add_argument("--arms", default="text,synthetic")
    ap.add_argument("--variants", default="", help="the synthetic arm with attention=V for each V named, instead")
    args = ap.parse_args()
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    out = Path(args.out or RESULTS)
    with scratch("llc-stages-") as root:
        rows, variants = [], [v for v in args.variants.split(",") if v]
        llc_on = ["maps.llc=true", *(["maps.llc_draws=5", "maps.llc_readings=4"] if args.smoke else [])]
        for arm in variants or args.arms.split(","):  # the long text runs first: two at a time, the short ones after
            kind = "synthetic" if variants else arm  # a variant runs the synthetic arm
            preset, steps, size, least = PRESETS[kind]
            size = SMOKE[kind] if args.smoke else size
            jobs = [(arm, [*llc_on, *([f"attention={arm}"] if variants else [])], seed) for seed in SEEDS]
            done = run_all(jobs, root, steps, args.smoke, args.workers, preset=preset, size=size)
            rows += [llc_row(run, arm, seed, least) for (_, _, seed), run in done]
            if variants:
                continue
            images = out / "images"  # seed 0's timeline, its LLC panel included
            images.mkdir(parents=True, exist_ok=True)
            shutil.copy(done[0][1]["dir"] / "maps" / "timeline.png",
                        images / f"llc_{arm}_timeline{'_smoke' if args.smoke else ''}.png")
        from attnexp.config import MapsConfig
        from attnexp.heads import llc

        d = MapsConfig()
        meta = {"device": device, "seeds": list(SEEDS), "smoke": args.smoke, "variants": variants,
                "presets": {a: {"preset": p[0], "steps": p[1]} for a, p in PRESETS.items()},
                "llc settings": {k: v for k, v in vars(d).items() if k.startswith("llc_")},
                "min_llc_change": llc.MIN_LLC_CHANGE,
                "command": "python -m attnexp train experiment=PRESET seed=S maps.llc=true threads=1 logger=none test=false "
                           "maps.animation=false" + (" attention=V" if variants else ""),
                "wall_s": round(sum(r["wall s"] for r in rows), 1)}
        stem = f"llc_stages_{device}{'_variants' if variants else ''}{'_smoke' if args.smoke else ''}"
        table = write_results(out, stem, meta, rows,
                              "The LLC's stages beside the heads' formations",
                              note="Each run: `python -m attnexp train experiment=PRESET seed=S maps.llc=true`. The LLC: "
                                   "devinterp's SGLD estimate at 16 of the timeline's readings. Stages: the LLC cut at its "
                                   "critical points (a rise or fall of at least 2.0 over a segment, else a plateau). A "
                                   "boundary is before / inside / after the in-context score's drop window (10-90% of its "
                                   "fall) at the resolution of the LLC's readings either side of it.")
        print(table)


if __name__ == "__main__":
    main()
