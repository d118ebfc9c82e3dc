#!/usr/bin/env python
"""The SGLD settings of maps.llc, chosen the way devinterp's calibration notebook advises: estimate
the LLC over a grid of step sizes (lr) and inverse temperatures (n_beta) at checkpoints from
different stages of training, and take the smallest step size whose chains settle (their loss trace
flat over the second half of the draws: heads.llc.Estimate.settled), give a positive LLC, and never
fail, at every checkpoint. A smaller step has not reached its equilibrium in the draws given (the
trace still climbs); every larger one settles too but adds its discretisation's bias (the estimate
keeps growing with the step: the table shows by how much). The localization (gamma = 100), 4 chains
x 100 draws, batches of 32 and 1,024 training windows are held fixed (devinterp's usual settings for
small models).

The checkpoints: `experiment=induction_heads` (seed 0) after 200 steps (the loss plateau, before any
head forms) and after its 1,500 (the circuit formed), each trained through `python -m attnexp train`.

    python scripts/studies/llc_calibration.py           # ~6 min on 2 cores
    python scripts/studies/llc_calibration.py --smoke   # tiny, to check the script

Writes scripts/results/llc_calibration_<device>.{json,md}; a test holds maps.llc's defaults to its choice.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from common import RESULTS, write_results  # noqa: E402

LRS = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)
NBETAS = (10.0, 30.0)  # 10: about devinterp's default_nbeta for batches of 32 (32 / ln 32 = 9.2)
STAGES = {"plateau (step 200)": 200, "formed (step 1500)": 1500}


def checkpoint(steps: int, out: Path, smoke: bool) -> Path:
    size = ["data.n_train=256", "data.n_val=32", "data.n_test=32"] if smoke else [f"data.n_train={steps * 32}"]
    cmd = [sys.executable, "-m", "attnexp", "train", "experiment=induction_heads", "seed=0", "logger=none", "threads=1",
           "test=false", "maps.enabled=false", "trainer.val_check_interval=1.0", "trainer.enable_progress_bar=false",
           *size, f"hydra.run.dir={out}"]
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stderr[-3000:]}")
    return out / "checkpoints" / "last.ckpt"


def model_and_windows(path: Path, examples: int):
    from attnexp.config import TaskConfig, from_dict
    from attnexp.data import build_datamodule
    from attnexp.heads import llc
    from attnexp.model import checkpoints
    from attnexp.training.evaluate import data_config

    ckpt = checkpoints.load(path, "ckpt")
    model, hp = checkpoints.model_from_checkpoint(ckpt, path)
    task = from_dict(TaskConfig, hp["task"], "task")
    dm = build_datamodule(data_config(ckpt, path, [], task), task, causal=True, seed=0)
    dm.setup("fit")
    table = dm.table("train", per_epoch=True)
    return model.train(), llc.windows(table.ids, table.lengths, examples, 0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args()
    import torch

    from attnexp.config import MapsConfig
    from attnexp.heads import llc

    torch.set_num_threads(2)
    d = MapsConfig()
    draws, chains = (10, 2) if args.smoke else (d.llc_draws, d.llc_chains)
    lrs, nbetas = (LRS[:2], NBETAS[:1]) if args.smoke else (LRS, NBETAS)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for stage, steps in STAGES.items():
            model, ids = model_and_windows(checkpoint(steps, Path(tmp) / str(steps), args.smoke), d.llc_examples)
            for nbeta in nbetas:
                for lr in lrs:
                    s = llc.Settings(lr, nbeta, d.llc_localization, chains, draws, 32)
                    t0 = time.perf_counter()
                    e = llc.estimate(model, ids, s, seed=0)
                    rows.append({"checkpoint": stage, "lr": lr, "nbeta": nbeta, "llc": round(e.value, 3),
                                 "chains' std": round(e.std, 3), "settled": e.settled,
                                 "seconds": round(time.perf_counter() - t0, 1)})
                    print(rows[-1], flush=True)
    healthy = lambda lr, nb: all(r["settled"] and r["llc"] > 0 for r in rows  # noqa: E731
                                 if r["lr"] == lr and r["nbeta"] == nb)
    chosen = {nb: min((lr for lr in lrs if healthy(lr, nb)), default=None) for nb in nbetas}
    nbeta = nbetas[0]  # devinterp's default for this batch size; the other column shows how the choice moves
    choice = {"lr": chosen[nbeta], "nbeta": nbeta, "localization": d.llc_localization, "chains": chains, "draws": draws}
    meta = {"rule": "the smallest lr whose chains settle with a positive LLC at every checkpoint, at nbeta "
                    f"{nbeta:g}", "smallest settled lr per nbeta": {f"{k:g}": v for k, v in chosen.items()},
            "choice": choice, "windows": d.llc_examples, "batch_size": 32, "smoke": args.smoke,
            "defaults_then": {k: v for k, v in asdict(d).items() if k.startswith("llc_")}}
    table = write_results(args.out, f"llc_calibration_{'cuda' if torch.cuda.is_available() else 'cpu'}"
                          + ("_smoke" if args.smoke else ""), meta, rows, "The LLC's SGLD settings, calibrated")
    print(table)
    print("chosen:", choice)


if __name__ == "__main__":
    main()
