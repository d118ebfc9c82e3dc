#!/usr/bin/env python
"""Plain text at the scale a phase change needs, sized by measurement (the GPU window's `text-scale`
part). Nothing is planted: 20 Newsgroups bytes in windows of 512, a 2-layer attention-only model with
rotary positions (d 256, 8 heads) against its 1-layer control, seeds side by side on one device, each
run through `python -m attnexp train experiment=induction_text data.repeat_fraction=0.0 ...`.

1. Every run of the plan starts at once for `--probe-s` seconds (trainer.max_time) and its tokens/s
   is read from its summary.json (tokens trained over training time, validation included).
2. The steps a run gets are then the fewer of `--target-tokens` and what that rate reaches in the time
   left of `--budget-s` (less a margin for start and end).
3. The runs start again, at once, for those steps; each one's row (attnexp's own timeline: the
   in-context score, every head's formation, the drop window) and its timeline.jsonl are written as
   soon as it ends.

The result file states the target, the measured rate and the tokens each run reached: a null result
says the scale it reached.

    python scripts/studies/text_scale.py --budget-s 300 --out DIR           # on a GPU
    python scripts/studies/text_scale.py --smoke --out DIR                  # tiny, on the CPU

Writes <out>/text_scale_<device><tag>.{json,md} and <out>/text_scale_timelines/<run>.jsonl.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "scripts" / "studies")]

from common import scratch, write_results  # noqa: E402
from induction_formation import row, train  # noqa: E402

ARMS = {"2 layers": ["model.n_layers=2"], "1 layer (control)": ["model.n_layers=1"]}
PLAIN = ["data.repeat_fraction=0.0", "model.mlp=false", "attention=rotary", "trainer.max_epochs=10000",
         "optim.min_lr_ratio=1.0", "optim.warmup_steps=0"]
SIZE = {"gpu": ["data.max_len=512", "data.batch_size=128", "model.d_model=256", "model.n_heads=8"],
        "smoke": ["data.max_len=64", "data.batch_size=8", "model.d_model=32", "model.n_heads=2", "data.limit=200"]}
LEAST_FALL = 0.3  # nats, as text_formation.py


def plan(seeds: int) -> list[tuple[str, list[str], int]]:
    return [(arm, ov, s) for s in range(seeds) for arm, ov in ARMS.items()]


def probe(jobs, root: Path, size: list[str], seconds: float, workers: int) -> dict[str, float]:
    """Tokens/s of each run of the plan, all at once for `seconds` of training."""
    limit = f"trainer.max_time=00:00:{int(seconds) // 60:02d}:{int(seconds) % 60:02d}"
    with ThreadPoolExecutor(workers) as pool:
        done = list(pool.map(lambda j: train(f"probe {j[0]} seed {j[2]}", [*PLAIN, *size, *j[1], f"seed={j[2]}", limit,
                                                                          "maps.every_n_steps=1000000"],
                                             root / f"probe-{slug(j[0])}-s{j[2]}", 0, False, preset="induction_text",
                                             size=[]), jobs))
    return {f"{r['name']}": round(r["summary"]["train_tokens"] / max(r["summary"]["train_time_s"], 1e-9), 1) for r in done}


def slug(arm: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in arm.lower()).strip("-")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget-s", type=float, default=300, help="the whole part: probe, runs and writing")
    ap.add_argument("--probe-s", type=float, default=20)
    ap.add_argument("--target-tokens", type=float, default=5e8, help="tokens a run aims at (Olsson-scale: 0.5 B)")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--margin-s", type=float, default=45, help="kept back for starting and ending the runs")
    ap.add_argument("--smoke", action="store_true", help="a tiny model on the CPU (the rehearsal)")
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", default=str(REPO / "scripts" / "results"))
    ap.add_argument("overrides", nargs="*", help="Hydra overrides for every run, e.g. data.path=DIR")
    args = ap.parse_args()
    import torch

    t0 = time.perf_counter()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    size = [*SIZE["smoke" if args.smoke else "gpu"], *args.overrides]
    jobs = plan(args.seeds)
    out = Path(args.out)
    (out / "text_scale_timelines").mkdir(parents=True, exist_ok=True)
    stem = f"text_scale_{device}{args.tag}"
    meta = {"device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu", "torch": torch.__version__,
            "setting": "experiment=induction_text " + " ".join([*PLAIN, *size]), "planted": "nothing (repeat_fraction 0)",
            "target_tokens": args.target_tokens, "budget_s": args.budget_s, "runs_at_once": len(jobs)}
    with scratch("text-scale-") as root:
        rates = probe(jobs, root, size, args.probe_s, len(jobs))
        tokens_a_step = int(next(o.split("=")[1] for o in size if o.startswith("data.batch_size="))) * \
            int(next(o.split("=")[1] for o in size if o.startswith("data.max_len=")))
        left = args.budget_s - (time.perf_counter() - t0) - args.margin_s
        rate = min(rates.values())
        steps = max(10, int(min(args.target_tokens, rate * left) // tokens_a_step))
        meta.update(probe_tokens_per_s=rates, seconds_left_after_probe=round(left, 1), steps=steps,
                    tokens_a_step=tokens_a_step, planned_tokens=steps * tokens_a_step,
                    reached_target=steps * tokens_a_step >= args.target_tokens)
        write_results(out, stem, meta, [], "Plain text at scale (no planting)")  # the plan, before any run ends
        runs(jobs, root, size, steps, out, stem, meta)
    print(f"text_scale.py: {len(jobs)} runs of {steps:,} steps ({steps * tokens_a_step / 1e6:,.1f} M tokens each) "
          f"in {time.perf_counter() - t0:.0f} s")


def runs(jobs, root: Path, size: list[str], steps: int, out: Path, stem: str, meta: dict) -> None:
    """The runs at once; each one's row and timeline written as soon as it ends."""
    every = ["maps.every_n_steps=" + str(max(1, steps // 40)), f"trainer.max_steps={steps}"]
    rows = []
    with ThreadPoolExecutor(len(jobs)) as pool:
        futures = {pool.submit(train, f"{arm} seed {seed}", [*PLAIN, *size, *ov, f"seed={seed}", *every],
                               root / f"{slug(arm)}-s{seed}", steps, False, preset="induction_text", size=[]): (arm, seed)
                   for arm, ov, seed in jobs}
        for f in as_completed(futures):
            arm, seed = futures[f]
            run = f.result()
            r = row(run, arm, seed, least=LEAST_FALL)
            r["tokens reached"] = run["summary"].get("train_tokens")
            rows.append(r)
            shutil.copyfile(run["dir"] / "maps" / "timeline.jsonl", out / "text_scale_timelines" / f"{slug(arm)}-s{seed}.jsonl")
            print(json.dumps({k: v for k, v in r.items() if k != "run-level changes"}), flush=True)
            write_results(out, stem, {**meta, "runs_done": len(rows)}, sorted(rows, key=lambda x: (x["arm"], x["seed"])),
                          "Plain text at scale (no planting)")


if __name__ == "__main__":
    main()
