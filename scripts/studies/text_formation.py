#!/usr/bin/env python
"""Induction heads forming on real text (Olsson et al. 2022's phase change, on 20 Newsgroups):
`experiment=induction_text` (a 2-layer attention-only model with rotary positions, a next-token loss
on 20 Newsgroups bytes in windows of 64, every window ending in a planted copy of an earlier span of
itself) with 3 seeds, against the 1-layer control, each through `python -m attnexp
train`.

Per run, read from its maps/timeline.jsonl (attnexp's own readings and change points, nothing tuned
here): the in-context score over steps on held-out text (Olsson's definition at 64 tokens: the mean
next-token loss over the last quarter of a window's positions minus that over its first quarter, on
the probe's 8 validation windows), the training loss, every head's formation (previous-token;
induction on repeated random tokens drawn from the bytes the text uses), the drop window (10% to
90% of the score's fall, where it falls by at least 0.3 nats), and where that lies in tokens. At the
end, from the last checkpoint, the copy gain on held-out text: the loss at the repeated tokens of 256
validation windows given a repeat, against the same positions of the plain windows.

    python scripts/studies/text_formation.py              # ~25 min on 2 cores (2 runs at a time)
    python scripts/studies/text_formation.py --smoke      # tiny, to check the script
    python scripts/studies/text_formation.py --variants alibi,smeared,causal,differential,softpick,sigmoid --tag _variants

Writes scripts/results/text_formation_<device>.{json,md}, images/text_timeline.png (2 layers, seed 0)
and images/text_control.png (1 layer, seed 0).
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

MAIN = {"2 layers": ["model.n_layers=2"], "1 layer (control)": ["model.n_layers=1"]}
LEAST_FALL = 0.3  # nats: the in-context score's fall that counts as a drop (MIN_CHANGE_NATS of heads.changes)


def copy_gain(run_dir: Path) -> dict:
    """Loss at the repeated tokens of held-out windows given their repeat, and at the same positions of
    the plain windows (nats), from the run's last checkpoint."""
    import torch
    import torch.nn.functional as F
    import yaml

    from attnexp.api import compose, load, load_run
    from attnexp.data import build_datamodule
    from attnexp.data.text import with_repeats

    said = yaml.safe_load((run_dir / ".hydra" / "overrides.yaml").read_text())  # the run's own command line
    run = load_run(compose(["experiment=induction_text", *[o for o in said if not o.startswith("hydra.")]], run_dir))
    dm = build_datamodule(run.data, run.task, causal=True)
    dm.setup()
    model = load(run_dir / "checkpoints" / "last.ckpt").model.eval()
    plain = dm.windows["test"][:256]  # plain text the run never trained or validated on
    repeated = with_repeats(plain, 1.0, seed=99)
    at = (repeated != plain)[:, 1:]
    out = {}
    with torch.no_grad():
        for name, x in (("plain", plain), ("repeated", repeated)):
            logits = model(x).logits[:, :-1]
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1), reduction="none")
            out[name] = round(float(loss.view(x.shape[0], -1)[at].mean()), 3)
    return {"loss at repeats, plain": out["plain"], "loss at repeats, repeated": out["repeated"],
            "copy gain": round(out["plain"] - out["repeated"], 3)}


def docs_rows(results: Path | None = None) -> str:
    """docs/maps.md's table of the text preset across variants, from the two result files (rotary:
    the main part's 2-layer runs; the others: --variants): a test holds the page to it."""
    import json
    import statistics

    res = Path(results or RESULTS)
    rows = [r for r in json.loads((res / "text_formation_cpu.json").read_text())["results"] if r["arm"] == "2 layers"]
    rows = [{**r, "arm": "rotary"} for r in rows]
    rows += json.loads((res / "text_formation_cpu_variants.json").read_text())["results"]
    out = []
    for arm in dict.fromkeys(r["arm"] for r in rows):
        mine = sorted((r for r in rows if r["arm"] == arm), key=lambda r: r["seed"])
        steps = [r["first induction"] for r in mine]
        formed = [s for s in steps if s is not None]
        when = ", ".join(f"{s:,}" if s is not None else "none" for s in steps)
        gain = ", ".join(f"{r['copy gain']:.2f}" for r in mine)
        icl = statistics.mean(r["icl end"] for r in mine)
        out.append(f"| {arm} | {len(formed)}/{len(mine)} | {when} | {icl:.2f} | {gain} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=20000, help="training steps a run (batch 32 x 64 tokens)")
    ap.add_argument("--workers", type=int, default=2, help="runs at once (each on one thread)")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--out", default=None, help="default: scripts/results")
    ap.add_argument("--tag", default="", help="suffix for the result files (e.g. _plain)")
    ap.add_argument("--no-control", action="store_true", help="the 2-layer runs only")
    ap.add_argument("--variants", default=None, help="comma list: across variants, 2 layers each (attention=V), "
                    "e.g. alibi,smeared,causal,differential,softpick,sigmoid (rotary is the main part)")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides for every run, e.g. data.repeat_fraction=0.0")
    args = ap.parse_args()
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    out = Path(args.out or RESULTS)
    with scratch("text-formation-") as root:
        size = (["data.limit=200", "trainer.max_steps=40", "maps.every_n_steps=5", "trainer.val_check_interval=20"]
                if args.smoke else [f"trainer.max_steps={args.steps}", "trainer.val_check_interval=1000"])
        arms = {k: v for k, v in MAIN.items() if k == "2 layers" or not args.no_control}
        if args.variants:  # the same preset with each variant's attention; one pool for all, so no core waits
            arms = {v: ["model.n_layers=2", f"attention={v}"] for v in args.variants.split(",")}
        jobs = [(arm, [*ov, *args.overrides], seed) for arm, ov in arms.items() for seed in SEEDS]
        done = run_all(jobs, root, args.steps, args.smoke, args.workers, preset="induction_text", size=size)
        rows = []
        for (arm, _, seed), run in done:
            r = row(run, arm, seed, least=LEAST_FALL)
            lo, _, hi = r["drop window"].partition("-")
            a_step = (run["summary"].get("train_tokens") or 0) / max(1, run["summary"]["steps"])  # tokens a step
            r["drop window, M tokens"] = f"{int(lo) * a_step / 1e6:.1f}-{int(hi) * a_step / 1e6:.1f}" if hi else "-"
            rows.append({**r, **copy_gain(run["dir"])})
        meta = {"device": device, "torch": torch.__version__, "steps": args.steps, "seeds": list(SEEDS),
                "preset": "experiment=induction_text", "overrides": args.overrides, "smoke": args.smoke,
                "least_fall_nats": LEAST_FALL,
                "command": "python -m attnexp train experiment=induction_text seed=S model.n_layers=L threads=1 "
                           "logger=none test=false maps.animation=false", "wall_s": round(sum(r["wall s"] for r in rows), 1)}
        table = write_results(out, f"text_formation_{device}{args.tag}", meta, rows,
                              "Induction heads forming on 20 Newsgroups windows with planted repeats: " +
                              ("across variants, 2 layers each" if args.variants else "2 layers against the 1-layer control"),
                              [c for c in rows[0] if c not in ("first induction",)],
                              note="Each run: `python -m attnexp train experiment=induction_text seed=S model.n_layers=L` "
                                   "(rotary, attention-only, bytes, windows of 64 each ending in a repeat of an earlier "
                                   "span, batch 32, constant lr 3e-3), read every 50 steps. `@step`: where attnexp's "
                                   "change-point search dates the formation. icl: the in-context score (late minus early "
                                   "loss, nats) on held-out windows at the start and the end; drop window: 10-90% of its "
                                   f"fall where it falls by {LEAST_FALL} nats or more. Copy gain: loss at the repeated "
                                   "tokens of 256 plain test windows minus that with the repeat planted." +
                                   (f" These runs add `{' '.join(args.overrides)}`, which replaces the preset's settings "
                                    "above where they differ." if args.overrides else ""))
        print(table)
        images = out / "images"
        images.mkdir(parents=True, exist_ok=True)
        for (arm, _, seed), run in done:
            if seed == 0 and not args.smoke and not args.variants:
                name = f"text_timeline{args.tag}.png" if arm == "2 layers" else f"text_control{args.tag}.png"
                shutil.copyfile(run["dir"] / "maps" / "timeline.png", images / name)


if __name__ == "__main__":
    main()
