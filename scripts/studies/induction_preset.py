#!/usr/bin/env python
"""What the shipped `experiment=induction` preset's model uses, found by ablation (issue: its
timeline shows no previous-token or induction head, yet test accuracy reaches 0.95).

The task: [BOS] r1..rn r1..rn [EOS], n = 4..10 distinct symbols of 16, r2..rn of the repeat predicted.
Two rules solve it on clean data and part on a corrupted one: *induction* (find the current token in
the first half, copy the token after it) and *position* (copy the token at the same place of the
first half: offset n back). Each test example's first half is corrupted by swapping two adjacent
symbols (never r1); at the repeat positions where the two rules then predict different tokens, the
trained model's argmax says which rule it follows. Then each head, and each layer, is silenced
(attnexp's head mask) and the clean test accuracy measured: which heads the solution needs.

    python scripts/studies/induction_preset.py                  # 3 seeds of each arm (~6 min on 2 cores)
    python scripts/studies/induction_preset.py --seeds 1 --smoke

Writes scripts/results/induction_preset_cpu.{json,md}. Arms: the preset as shipped (learned absolute
positions), with rotary positions, and experiment=induction_heads' model on it (attention-only).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from common import RESULTS, write_results  # noqa: E402

ARMS = {"preset (learned positions)": [], "rotary": ["attention=rotary"],
        "rotary, attention-only": ["attention=rotary", "model.mlp=false"]}


def train(arm: list[str], seed: int, out: Path, smoke: bool) -> Path:
    if (out / "checkpoints" / "last.ckpt").is_file() and (out / "summary.json").is_file():  # --runs: trained already
        return out / "checkpoints" / "last.ckpt"
    extra = ["data.n_train=300", "data.n_val=50", "data.n_test=100", "trainer.max_epochs=1"] if smoke else []
    cmd = [sys.executable, "-m", "attnexp", "train", "experiment=induction", *arm, f"seed={seed}", *extra, "logger=none",
           "trainer.enable_progress_bar=false", "maps.animation=false", "threads=1", f"hydra.run.dir={out}"]
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stderr[-3000:]}")
    return out / "checkpoints" / "last.ckpt"


def loaded(ckpt: Path):
    """The model and the test split of a checkpoint, as `attnexp eval` reads them (checkpoints as data)."""
    from attnexp.config import TaskConfig, from_dict
    from attnexp.data import build_datamodule
    from attnexp.model import checkpoints
    from attnexp.training.evaluate import data_config

    data = checkpoints.load(ckpt, "ckpt")
    model, hp = checkpoints.model_from_checkpoint(data, ckpt)
    task = from_dict(TaskConfig, hp["task"], "task")
    dm = build_datamodule(data_config(data, ckpt, [], task), task, causal=model.a.causal)
    dm.setup("fit")
    return model.eval(), dm


@torch.no_grad()
def accuracy(model, dm, head_mask: torch.Tensor | None = None) -> float:
    """Accuracy on the test split's answer tokens, some heads silenced (1 keeps, 0 silences)."""
    right = total = 0
    for b in dm.test_dataloader():
        logits = model(b["input_ids"], b["pad_mask"], head_mask_LH=head_mask).logits
        keep = b["labels"] != -100
        right += int((logits.argmax(-1) == b["labels"])[keep].sum())
        total += int(keep.sum())
    return right / max(total, 1)


RULES = ("induction", "position", "earliest unrepeated")


def predictions(first: list[int], repeat: list[int], i: int) -> dict[str, int | None]:
    """What each rule predicts after repeat[i]: induction (the token after repeat[i]'s place in the
    first half), position (the first half's token at the same place), earliest unrepeated (the first
    token of the first half that the repeat has not shown yet: a set difference, no pairing)."""
    k = first.index(repeat[i])
    shown = set(repeat[:i + 1])
    return {"induction": first[k + 1] if k + 1 < len(first) else None, "position": first[i + 1],
            "earliest unrepeated": next((t for t in first if t not in shown), None)}


@torch.no_grad()
def which_rule(model, dm, seed: int) -> dict:
    """On first halves with two adjacent symbols swapped: at the repeat positions where the rules do
    not all agree, the share of the model's predictions each rule gives (a prediction may match two)."""
    rng, counts, compared = random.Random(seed), dict.fromkeys(RULES, 0), 0
    for item in dm.splits["test"]:
        ids = item["input_ids"]
        n = (len(ids) - 2) // 2
        if n < 4:
            continue
        first, repeat = list(ids[1:1 + n]), list(ids[1 + n:1 + 2 * n])
        j = rng.randrange(1, n - 1)  # never r1: the repeat still starts where r1 comes again
        first[j], first[j + 1] = first[j + 1], first[j]
        pred = model(torch.tensor([[ids[0], *first, *repeat, ids[-1]]]), None).logits[0].argmax(-1).tolist()
        for i in range(n - 1):  # the query at repeat[i] predicts repeat[i + 1]
            by = predictions(first, repeat, i)
            if len(set(by.values())) == 1:
                continue
            compared += 1
            for rule in RULES:
                counts[rule] += pred[1 + n + i] == by[rule]
    return {k: round(v / max(compared, 1), 3) for k, v in counts.items()} | {"positions": compared}


def ablations(model, dm) -> dict:
    """Clean test accuracy, then with each layer and each head silenced."""
    L, H = model.m.n_layers, model.m.n_heads
    out = {"clean": accuracy(model, dm)}
    for layer in range(L):
        mask = torch.ones(L, H)
        mask[layer] = 0
        out[f"L{layer}"] = accuracy(model, dm, mask)
        for h in range(H):
            mask = torch.ones(L, H)
            mask[layer, h] = 0
            out[f"L{layer}H{h}"] = accuracy(model, dm, mask)
    return {k: round(v, 3) for k, v in out.items()}


def study(arm: str, overrides: list[str], seed: int, root: Path, smoke: bool) -> dict:
    t0 = time.time()
    name = "".join(c if c.isalnum() else "-" for c in arm).strip("-")
    model, dm = loaded(train(overrides, seed, root / f"{name}-s{seed}", smoke))
    acc = ablations(model, dm)
    heads = {k: v for k, v in acc.items() if "H" in k}
    needed = sorted(heads, key=heads.get)[:3]
    rule = which_rule(model, dm, seed)
    return {"arm": arm, "seed": seed, "test acc": acc["clean"],
            **{f"follows {r}": rule[r] for r in RULES}, "positions compared": rule["positions"],
            **{f"L{k} silenced": acc[f"L{k}"] for k in range(model.m.n_layers)},
            "heads it needs most (acc without)": ", ".join(f"{h} {heads[h]}" for h in needed),
            "wall s": round(time.time() - t0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="tiny runs, to check the script")
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--runs", help="keep the trained runs here (and reuse those already there); default: a temporary folder")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory(prefix="attnexp-preset-") as tmp:
        for arm, overrides in ARMS.items():
            for seed in range(args.seeds):
                rows.append(study(arm, overrides, seed, Path(args.runs or tmp), args.smoke))
                print(rows[-1], flush=True)
    meta = {"device": "cpu", "torch": torch.__version__, "preset": "experiment=induction", "seeds": args.seeds,
            "smoke": args.smoke}
    note = ("Corrupted first halves (two adjacent symbols swapped, never r1): at the repeat positions where the "
            "rules do not all agree, the share of the model's predictions each rule gives (induction: the token "
            "after the current one's place in the first half; position: the first half's token at the same place; "
            "earliest unrepeated: the first first-half token the repeat has not shown yet). Silenced: clean test "
            "accuracy with a layer's or a head's output zeroed.")
    print(write_results(args.out, "induction_preset_cpu" + ("_smoke" if args.smoke else ""), meta, rows,
                        "What the induction preset's model uses", note=note))


if __name__ == "__main__":
    main()
