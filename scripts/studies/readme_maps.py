#!/usr/bin/env python
"""The README's pictures of attention maps, each from a real run, under scripts/results/images/:

- copy, reverse: a 2-layer model trained 4 epochs; the last epoch's grid of one example.
- agreement: `experiment=toy_agreement`; the grid of one example (heads scored on how much the
  [BOS] token looks at the subject) and a table of every head: its alignment, and the validation
  accuracy lost when it alone, or its whole layer, is silenced (agreement.json).
- report: a screenshot of `attnexp compare report=` over the README's sweep (variants x seeds).
- newsgroups: a grid of a 20 Newsgroups post and two screenshots of the viewer (map and text
  views, headless Chromium), from a run of `experiment=newsgroups` (given with --newsgroups-run,
  or trained here: about 10 minutes on 2 CPU cores).

    python scripts/studies/readme_maps.py                               # everything
    python scripts/studies/readme_maps.py --parts agreement
    python scripts/studies/readme_maps.py --parts report       # the comparison report of a 9-run sweep (~5 min)
    python scripts/studies/readme_maps.py --parts newsgroups --newsgroups-run outputs/2026-11-22/12-54-50_bidirectional
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from common import RESULTS, provenance, scratch, screenshot, write_results  # noqa: E402

OUT = REPO / "scripts" / "results" / "images"
QUIET = ["logger=none", "trainer.enable_progress_bar=false"]


def train_cli(run: Path, overrides: list[str]) -> dict:
    subprocess.run([sys.executable, "-m", "attnexp", "train", *overrides, *QUIET, f"hydra.run.dir={run}"],
                   cwd=REPO, check=True, capture_output=True)
    return json.loads((run / "summary.json").read_text())


def synthetic(report: dict, work: Path) -> None:
    for kind in ("copy", "reverse"):
        run = work / kind
        s = train_cli(run, [f"experiment={kind}", "trainer.max_epochs=4", "data.length=6"])
        shutil.copy(sorted((run / "maps").glob("epoch*_ex0.png"))[-1], OUT / f"{kind}.png")
        report[kind] = {"val_acc": s["metrics"]["final"]["val/acc"], "alignment": s["attention_maps"]["alignment"],
                        "train_time_s": s["train_time_s"], "device": s["device"]}
        print(kind, json.dumps(report[kind]), flush=True)


def agreement(report: dict, work: Path) -> None:
    import numpy as np
    import torch

    from attnexp.api import compose, load_run
    from attnexp.data import build_datamodule
    from attnexp.training.module import AttnexpModule

    run_dir = work / "agreement"
    s = train_cli(run_dir, ["experiment=toy_agreement"])
    best = s["checkpoints"]["best"]
    epoch = int(Path(best).stem.split("epoch")[-1])
    shutil.copy(run_dir / "maps" / f"epoch{epoch:03d}_ex0.png", OUT / "agreement.png")
    alignment = np.load(run_dir / "maps" / f"epoch{epoch:03d}.npz", allow_pickle=False)["alignment"]

    run = load_run(compose(["experiment=toy_agreement"]))
    dm = build_datamodule(run.data, run.task, causal=run.attention.causal, seed=run.seed)
    dm.setup()
    model = AttnexpModule.load_from_checkpoint(best).model.eval()
    L, H = model.m.n_layers, model.m.n_heads

    def accuracy(mask) -> float:
        right = n = 0
        with torch.no_grad():
            for b in dm.val_dataloader():
                pred = model(b["input_ids"], b["pad_mask"], head_mask_LH=mask).logits.argmax(-1)
                right, n = right + int((pred == b["labels"]).sum()), n + len(pred)
        return right / n

    full = accuracy(torch.ones(L, H))
    heads = []
    for layer in range(L):
        for head in range(H):
            mask = torch.ones(L, H)
            mask[layer, head] = 0
            heads.append({"layer": layer, "head": head, "alignment": round(float(alignment[layer, head]), 3),
                          "accuracy_without": round(accuracy(mask), 4)})
    layers = []
    for layer in range(L):
        mask = torch.ones(L, H)
        mask[layer] = 0
        layers.append({"layer": layer, "accuracy_without": round(accuracy(mask), 4)})
    report["agreement"] = {"val_acc": round(full, 4), "best_epoch": epoch, "heads": heads, "layers": layers,
                           "train_time_s": s["train_time_s"], "device": s["device"]}
    print("| head | alignment ([BOS] → subject) | val acc without it |\n| --- | --- | --- |")
    for h in heads:
        print(f"| L{h['layer']}H{h['head']} | {h['alignment']:.2f} | {h['accuracy_without']:.3f} |")
    print(f"all heads: {full:.3f}; " + "; ".join(f"without layer {x['layer']}: {x['accuracy_without']:.3f}" for x in layers))


def comparison(report: dict, work: Path) -> None:
    """The README's comparison: variants x seeds (the sweep the README shows), its report page, a
    screenshot of the page's top (report.png)."""
    sweep = work / "report"
    cmd = [sys.executable, "-m", "attnexp", "train", "-m", "experiment=induction", "attention=causal,rotary,differential",
           "seed=0,1,2", "trainer.max_epochs=3", *QUIET, f"hydra.sweep.dir={sweep}"]
    subprocess.run(cmd, cwd=REPO, check=True, capture_output=True, timeout=3600)
    page = sweep / "report.html"
    subprocess.run([sys.executable, "-m", "attnexp", "compare", str(sweep), f"report={page}"], cwd=REPO, check=True,
                   capture_output=True, timeout=600)
    screenshot(page.as_uri(), OUT / "report.png", "1200,1400")
    groups = sweep_groups(sweep, {"test/acc": True, "val/loss": False})
    report["report"] = {"sweep": str(sweep), "command": " ".join(cmd[1:]), "groups": groups}
    rows = [{"attention": g, "metric": m, "mean": d["mean"], "sd": d["sd"], "n": d["n"], "values": d["values"],
             "best": d["best"], "welch_p_vs_best": d["welch_p_vs_best"]} for g, ms in groups.items() for m, d in ms.items()]
    write_results(RESULTS, "readme_comparison_cpu", {"command": report["report"]["command"]}, rows,
                  "The README's comparison sweep: each metric's mean, sd over seeds, Welch's p against its best group",
                  runs=[sweep])


def sweep_groups(sweep: Path, metrics: dict[str, bool]) -> dict[str, dict[str, dict]]:
    """attention -> metric -> mean, sd (over seeds), n, whether it is the best group on that metric and
    Welch's p against the best group on that same metric (`metrics`: name -> higher is better): the
    groups and values `attnexp compare` makes (val/loss, the checkpoint monitor, is its `best`), with
    the p it gives the monitor given to every metric asked for."""
    from attnexp.results.compare import Table, group_rows, read, stats
    from attnexp.results.significance import welch_p

    t = Table(read([sweep]))
    _, rows = group_rows(t)
    out: dict[str, dict[str, dict]] = {}
    for metric, higher in metrics.items():
        key = "best" if metric == t.monitor else metric
        have = {r["attention"]: r["_values"].get(key, []) for r in rows if len(r["_values"].get(key, [])) >= 2}
        if not have:
            continue
        best = (max if higher else min)(have, key=lambda g: stats(have[g])["mean"])
        for g, xs in have.items():
            st = stats(xs)
            out.setdefault(g, {})[metric] = {"mean": round(st["mean"], 4), "sd": round(st["std"], 4), "n": st["n"],
                                             "values": [round(float(x), 6) for x in xs],  # each seed's, as compare read it
                                             "best": g == best,
                                             "welch_p_vs_best": None if g == best else round(welch_p(xs, have[best]), 4)}
    return out


def newsgroups(report: dict, run_dir: Path | None, example: int, work: Path) -> None:
    import numpy as np

    from attnexp.maps import render

    if run_dir is None:
        run_dir = work / "newsgroups"
        train_cli(run_dir, ["experiment=newsgroups"])
    s = json.loads((run_dir / "summary.json").read_text())
    last = sorted((run_dir / "maps").glob("epoch*.npz"))[-1]
    z = np.load(last, allow_pickle=False)
    tokens = list(z["tokens"][example][: z["lengths"][example]])
    title = (f"20 Newsgroups, raw posts: a validation post of {len(tokens)} tokens after epoch {int(z['epoch'])} "
             f"(test acc {s['metrics']['test'].get('test/acc', s['metrics']['test'].get('best_val/acc', float('nan'))):.3f})")
    render.grid(z["weights"][:, example].astype(np.float32), tokens, title, 64).save(OUT / "newsgroups_grid.png")
    viewer = (run_dir / "maps" / "viewer.html").resolve().as_uri()
    screenshot(f"{viewer}#example={example}&layer=0&head=2", OUT / "newsgroups_viewer_map.png", "1100,960")
    screenshot(f"{viewer}#view=text&example={example}&layer=0&head=2&token=60", OUT / "newsgroups_viewer_text.png",
               "1100,720")
    report["newsgroups"] = {"run": str(run_dir), "example": example, "tokens": len(tokens),
                            "test_acc": s["metrics"]["test"].get("test/acc"), "device": s["device"]}
    print("newsgroups", json.dumps(report["newsgroups"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="synthetic,agreement,newsgroups")
    ap.add_argument("--newsgroups-run", type=Path, help="a finished experiment=newsgroups run folder to draw from")
    ap.add_argument("--example", type=int, default=2, help="which probe example of the 20NG run")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "readme_maps.json"
    report = json.loads(path.read_text()) if path.is_file() else {}
    parts = args.parts.split(",")
    with scratch("readme-maps-") as work:  # the runs pictured: read here, then removed
        if "synthetic" in parts:
            synthetic(report, work)
        if "agreement" in parts:
            agreement(report, work)
        if "newsgroups" in parts:
            newsgroups(report, args.newsgroups_run, args.example, work)
        if "report" in parts:
            comparison(report, work)
        keys = {"synthetic": ("copy", "reverse")}  # the file gathers parts made by different calls: each says how
        for key in (k for part in parts for k in keys.get(part, (part,))):
            folders = [report[key][f] for f in ("sweep", "run") if f in report[key]]  # the part's own runs
            report.setdefault("made", {})[key] = provenance(runs=folders)
    path.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
