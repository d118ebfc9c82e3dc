#!/usr/bin/env python
"""The README's pictures of what heads do and which matter, each from a real run, under
scripts/results/images/:

- importance: `experiment=induction maps.importance=true` (10 epochs, ~5 minutes on 2 CPU cores,
  or a finished run given with --induction-run): each head's importance (the validation loss
  increase with it silenced) at a few epochs, and over all epochs how many heads carry 90% of
  it, the best head's induction score and alignment, and validation accuracy
  (heads_over_epochs.png, heads_over_epochs.json).
- relevance: a 20 Newsgroups test post through a classifier checkpoint (--ckpt: the MiniLM
  fine-tune of scripts/studies/finetune.py, say), each token shaded by its relevance to the
  predicted and to the true class (Chefer et al.'s gradient x attention), as the viewer's text
  view draws it (relevance_pred.png, relevance_true.png).

    python scripts/studies/readme_heads.py --parts importance
    python scripts/studies/readme_heads.py --parts relevance --ckpt RUN/checkpoints/best-epoch02.ckpt
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "scripts" / "results" / "images"
SHARED = REPO.parent / "shared"
sys.path.insert(0, str(REPO / "scripts"))

from common import provenance, scratch  # noqa: E402


def importance(run: Path | None, work: Path) -> dict:
    """heads_over_epochs.png/json from experiment=induction with maps.importance (trained here unless `run`)."""
    if run is None:
        run = work / "induction"
        subprocess.run([sys.executable, "-m", "attnexp", "train", "experiment=induction", "maps.importance=true",
                        "logger=none", "trainer.enable_progress_bar=false", f"hydra.run.dir={run}"], cwd=REPO, check=True,
                       capture_output=True)
    s = json.loads((run / "summary.json").read_text())
    epochs, imps, rows = importance_rows(run, {h["epoch"]: h.get("val/acc") for h in s["metrics"]["history"]})
    importance_figure(epochs, imps, rows, s["attention"]["name"])
    (OUT / "heads_over_epochs.json").write_text(json.dumps({"run": str(run), "made": provenance(), "epochs": rows},
                                                           indent=2) + "\n")
    return {"run": str(run), "last": rows[-1]}


def importance_rows(run: Path, acc: dict) -> tuple[list[int], list, list[dict]]:
    """Per snapshot of the run: its epoch, its importance table and a row of what the heads do."""
    from attnexp.heads.importance import heads_for_share
    from attnexp.maps import snapshot

    epochs, imps, rows = [], [], []
    for path in snapshot.files(run / "maps"):
        st = snapshot.read(path).analysis.scores
        e = int(path.stem[len("epoch"):])
        epochs.append(e)
        imps.append(st["importance"])
        best = np.unravel_index(int(np.argmax(st["induction"])), st["induction"].shape)
        rows.append({"epoch": e, "val_acc": acc.get(e), "heads_90": heads_for_share(st["importance"]),
                     "importance": np.round(np.asarray(st["importance"], dtype=float), 4).tolist(),  # nats, (L, H)
                     "induction_best": float(st["induction"][best]), "induction_head": f"L{best[0]}H{best[1]}",
                     "alignment_best": float(st["alignment"].max()),
                     "alignment_head": "L{}H{}".format(*np.unravel_index(int(np.argmax(st["alignment"])),
                                                                         st["alignment"].shape))})
    return epochs, imps, rows


def importance_figure(epochs: list[int], imps: list, rows: list[dict], variant: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = sorted({0, 1, len(epochs) // 2, len(epochs) - 1})
    fig = plt.figure(figsize=(12, 5.2))
    top = max(float(np.max(imps)), 1e-9)
    for k, i in enumerate(shown):
        ax = fig.add_subplot(2, len(shown), k + 1)
        im = ax.imshow(np.clip(imps[i], 0, None), cmap="viridis", vmin=0, vmax=top)
        L, H = imps[i].shape
        for li in range(L):
            for h in range(H):
                ax.text(h, li, f"{imps[i][li, h]:.2f}", ha="center", va="center", fontsize=8,
                        color="black" if imps[i][li, h] > 0.6 * top else "white")
        ax.set_xticks(range(H), [f"H{h}" for h in range(H)], fontsize=8)
        ax.set_yticks(range(L), [f"L{li}" for li in range(L)], fontsize=8)
        ax.set_title(f"epoch {epochs[i]}: {rows[i]['heads_90']} heads carry 90%", fontsize=9)
    fig.colorbar(im, ax=fig.axes, shrink=0.6, label="val loss increase, head silenced")
    ax = fig.add_subplot(2, 1, 2)
    ax.plot(epochs, [r["induction_best"] for r in rows], marker="o", label="best head's induction score")
    ax.plot(epochs, [r["alignment_best"] for r in rows], marker="s", label="best head's alignment (task)")
    ax.plot(epochs, [r["val_acc"] for r in rows], marker="^", label="validation accuracy")
    ax2 = ax.twinx()
    ax2.step(epochs, [r["heads_90"] for r in rows], where="mid", color="grey", ls="--", label="heads carrying 90%")
    ax2.set_ylabel("heads carrying 90% of importance")
    ax2.set_ylim(0, imps[0].size + 0.5)
    ax.set_xlabel("epoch")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower center", fontsize=8, ncol=3)
    ax2.legend(loc="upper left", fontsize=8)
    fig.suptitle(f"experiment=induction ({variant}, {imps[0].shape[0]} layers x {imps[0].shape[1]} heads): "
                 "head importance and the induction circuit over training", fontsize=10)
    fig.savefig(OUT / "heads_over_epochs.png", dpi=100, bbox_inches="tight")
    plt.close(fig)


def post(data: Path, tokens_at_most: int = 110) -> tuple[str, int]:
    """The first test post (headers kept: the model trained on raw posts) short enough to read whole."""
    with gzip.open(data / "test.jsonl.gz", "rt") as f:
        for line in f:
            r = json.loads(line)
            if 40 <= len(r["text"].split()) <= tokens_at_most * 0.6:
                return r["text"], int(r["label"])
    raise SystemExit("readme_heads.py: no short post in the test split")


def relevance(ckpt: Path, data: Path, work: Path) -> dict:
    from attnexp.api import maps_source_checkpoint
    from attnexp.config import MapsConfig
    from attnexp.data.newsgroups import NAMES
    from attnexp.heads.analysis import context_of, read_heads
    from attnexp.heads.probe import attention_maps
    from attnexp.maps.html import write_viewer

    sys.path.insert(0, str(REPO / "scripts"))
    from common import screenshot

    text, label = post(data)
    src = maps_source_checkpoint(str(ckpt), [text])
    src.probe.labels = [label]
    ctx = context_of(src.model, src.probe)
    w = attention_maps(src.model, src.probe, src.pad_id)
    a = read_heads(src.model, src.probe, w, src.pad_id, MapsConfig(roles=True, rollout=True, relevance=True), ctx)
    write_viewer(work / "viewer.html", [(src.epoch, w, a)], src.probe.tokens, 128, title=f"{ckpt.parent.parent.name}",
                 class_names=list(NAMES))
    screenshot((work / "viewer.html").as_uri() + "#view=relevance&cls=p", OUT / "relevance_pred.png", "1100,640")
    screenshot((work / "viewer.html").as_uri() + "#view=relevance&cls=t", OUT / "relevance_true.png", "1100,640")
    r = a.relevance[0]
    top = np.argsort(-r["pred_scores"])[:8]
    return {"ckpt": str(ckpt), "label": NAMES[label], "pred": NAMES[r["pred"]], "tokens": len(src.probe.tokens[0]),
            "top_tokens_pred": [src.probe.tokens[0][i] for i in top]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="importance,relevance")
    ap.add_argument("--induction-run", type=Path, help="a finished experiment=induction maps.importance=true run")
    ap.add_argument("--ckpt", type=Path, help="a 20 Newsgroups classifier checkpoint (relevance)")
    ap.add_argument("--data", type=Path, default=SHARED / "data" / "20newsgroups")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "readme_heads.json"
    report = json.loads(path.read_text()) if path.is_file() else {}
    if "relevance" in args.parts and args.ckpt is None:
        raise SystemExit("readme_heads.py: --parts relevance needs --ckpt (a 20 Newsgroups classifier checkpoint)")
    with scratch("readme-heads-") as work:  # the run and the page pictured: read here, then removed
        if "importance" in args.parts:
            report["importance"] = importance(args.induction_run, work)
            print("importance", json.dumps(report["importance"]))
        if "relevance" in args.parts:
            report["relevance"] = relevance(args.ckpt, args.data, work)
            print("relevance", json.dumps(report["relevance"]))
    for part in args.parts.split(","):  # the file gathers parts made by different calls: each says how it was made
        report.setdefault("made", {})[part] = provenance()
    path.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
