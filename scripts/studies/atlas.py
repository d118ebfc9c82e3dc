#!/usr/bin/env python
"""The atlas: what every attention variant learns on tasks whose right attention is known.

Every registered variant x the synthetic tasks (copy, reverse, sort, recall, induction: causal
language modelling) and the toy grammar (`experiment=toy_agreement`: bidirectional
classification), with one fixed small model and budget, over seeds. One Hydra multirun per task
(`python -m attnexp train -m attention=...,... seed=...`), so every run is an ordinary run dir
with its summary.json, maps and viewer; `attnexp compare report=` of each task's sweep is written
next to it. Then one table and two figures:

- per variant and task: accuracy (mean over seeds of the best checkpoint's test accuracy), steps
  to 99% validation accuracy (first epoch end that reached it, mean over the seeds that did;
  "-" if none did), best alignment score (the best head's mean weight on the key the task
  requires), the entropy and first-token mass of that head, how many heads carry 90% of the
  importance (the loss increase with each head silenced, maps.importance), the induction score of
  the best head (Olsson et al.'s, on a repeated random sequence; causal tasks) and in how many
  runs that head is the best-aligned one, tokens/s of training and parameters;
- atlas_accuracy.png: accuracy as a variants x tasks heat map;
- atlas_recall.png: the best-aligned head of every variant on one recall example (seed 0).

    python scripts/studies/atlas.py                                   # the README's atlas (see --help)
    python scripts/studies/atlas.py --variants mha,sink --tasks recall --seeds 1 --epochs 2   # a quick look
    python scripts/studies/atlas.py --tasks induction --runs DIR --reuse       # the tables of finished sweeps

Writes scripts/results/atlas_<device>.{json,md} and scripts/results/images/atlas_*.png; the runs
stay under --runs (default: a temporary folder, printed).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from common import RESULTS, markdown_table, provenance, scratch  # noqa: E402

TASKS = ("copy", "reverse", "sort", "recall", "induction", "toy_agreement")
QUIET = ["logger=none", "trainer.enable_progress_bar=false", "maps.animation=false", "maps.images_to_logger=false",
         "maps.importance=true"]  # each head's importance every epoch: how many heads carry 90% of it


def option(variant: str) -> str:
    """The conf/attention option of a registered variant (`mha` is the `causal` preset; the mask
    is set per task below)."""
    return "causal" if variant == "mha" else variant


def sweep(task: str, variants: list[str], seeds: int, epochs: int, root: Path, extra: list[str]) -> float:
    """One multirun of every variant x seed on `task`; returns its wall time."""
    overrides = [f"experiment={task}", f"attention={','.join(option(v) for v in variants)}",
                 f"seed={','.join(map(str, range(seeds)))}",
                 f"trainer.max_epochs={epochs}", *QUIET, *extra, f"hydra.sweep.dir={root / task}",
                 "hydra.sweep.subdir=${attention.name}_s${seed}"]
    if task == "toy_agreement":
        overrides.append("attention.mask=bidirectional")
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "attnexp", "train", "-m", *overrides], cwd=REPO, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"atlas: the {task} sweep failed (exit {r.returncode}):\n{r.stderr[-3000:]}")
    subprocess.run([sys.executable, "-m", "attnexp", "compare", str(root / task), f"report={root / task / 'report.html'}"],
                   cwd=REPO, capture_output=True)
    return time.perf_counter() - t0


def best_head_stats(run: Path, align: dict | None) -> dict:
    """From the last epoch's maps: the entropy and first-token mass of the best-aligned head; how
    many heads carry 90% of the importance (heads.importance); the best head's induction score (on
    a repeated random sequence, causal models) and whether that head is the best-aligned one."""
    from attnexp.heads.importance import heads_for_share
    from attnexp.maps import snapshot

    snaps = snapshot.files(run / "maps")
    if not snaps:
        return {}
    out = {}
    z = snapshot.read(snaps[-1]).analysis.scores
    if align:
        layer, head = align["layer"], align["head"]
        out.update(entropy=float(z["entropy"][layer, head]), first_token=float(z["first_token"][layer, head]))
    if "importance" in z:
        out["heads_90"] = heads_for_share(z["importance"])
        out["heads"] = int(z["importance"].size)
    if "induction" in z:
        ind = z["induction"]
        best = np.unravel_index(int(np.argmax(ind)), ind.shape)
        out["induction"] = float(ind[best])
        if align:
            out["induction_is_aligned"] = (int(best[0]), int(best[1])) == (align["layer"], align["head"])
    return out


def run_row(run: Path) -> dict:
    s = json.loads((run / "summary.json").read_text())
    hist = s["metrics"].get("history") or []
    reach = [h["step"] for h in hist if (h.get("val/acc") or 0) >= 0.99]
    test = s["metrics"].get("test") or {}
    align = (s.get("attention_maps") or {}).get("alignment")
    return {"variant": s["attention"]["name"], "seed": s["seed"], "status": s["status"],
            "acc": test.get("test/acc", test.get("best_val/acc", s["metrics"]["final"].get("val/acc"))),
            "acc_split": "test" if "test/acc" in test else "val",  # synthetic tasks had no test split before
            "steps_to_99": reach[0] if reach else None, "alignment": align["best"] if align else None,
            "tokens_per_s": s.get("tokens_per_s"), "params": s["model"]["n_params"],
            **best_head_stats(run, align), "run": str(run)}


def mean(xs):
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


def aggregate(rows: list[dict]) -> dict:
    return {"acc_split": "/".join(sorted({r["acc_split"] for r in rows})),
            "acc": mean(r["acc"] for r in rows), "acc_sd": statistics.stdev([r["acc"] for r in rows]) if len(rows) > 1 else 0.0,
            "reached_99": sum(r["steps_to_99"] is not None for r in rows), "n": len(rows),
            "steps_to_99": mean(r["steps_to_99"] for r in rows), "alignment": mean(r["alignment"] for r in rows),
            "entropy": mean(r.get("entropy") for r in rows), "first_token": mean(r.get("first_token") for r in rows),
            "tokens_per_s": mean(r["tokens_per_s"] for r in rows), "params": rows[0]["params"],
            "heads_90": mean(r.get("heads_90") for r in rows), "heads": rows[0].get("heads"),
            "induction": mean(r.get("induction") for r in rows),
            "induction_is_aligned": sum(bool(r.get("induction_is_aligned")) for r in rows)}


def fmt(x, spec=".2f", none="-"):
    return none if x is None else format(x, spec)


def markdown(table: dict, tasks: list[str], variants: list[str]) -> str:
    lines = []
    for task in tasks:
        causal = task != "toy_agreement"
        split = "/".join(sorted({a["acc_split"] for a in table[task].values()}))
        chosen = ", the split the checkpoint was chosen on" if split == "val" else ""
        cols = ["variant", "acc (sd)", "steps to 99% (runs)", "alignment", "entropy", "first-token mass", "heads for 90%",
                *(["induction score (best head = best-aligned)"] if causal else []), "tokens/s", "params"]
        rows = []
        for v in variants:
            a = table[task].get(v)
            if a is None:
                continue
            steps = f"{a['steps_to_99']:.0f} ({a['reached_99']}/{a['n']})" if a["steps_to_99"] is not None else f"- (0/{a['n']})"
            heads = f"{a['heads_90']:.1f} of {a['heads']}" if a.get("heads_90") is not None else "-"
            induction = [f"{fmt(a.get('induction'))} ({a.get('induction_is_aligned', 0)}/{a['n']})"] if causal else []
            rows.append([v, f"{a['acc']:.3f} ({a['acc_sd']:.3f})", steps, fmt(a["alignment"]), fmt(a["entropy"]),
                         fmt(a["first_token"]), heads, *induction, fmt(a["tokens_per_s"], ",.0f"), f"{a['params']:,}"])
        lines += [f"\n**{task}** (acc on the {split} split{chosen})\n", markdown_table(rows, cols)]
    return "\n".join(lines) + "\n"


def acc_cell(a: dict) -> str:
    """Accuracy as docs/results.md shows it: mean ± sd over the seeds, bold where it solves the task."""
    mean = f"**{a['acc']:.2f}**" if a["acc"] >= 0.975 else f"{a['acc']:.2f}"
    return f"{mean} ± {a['acc_sd']:.2f}"


def docs_tables(results: Path = RESULTS) -> dict[str, str]:
    """docs/results.md's two atlas tables from the result files (`--docs` prints them):
    `atlas` (every task, atlas_cpu.json) and `heads` (induction with head importance,
    atlas_cpu_heads.json, then the q/k/v-initialisation ablation of atlas_cpu_heads_xavier.json)."""
    t = json.loads((results / "atlas_cpu.json").read_text())["table"]
    tasks = [k for k in TASKS if k in t]
    names = {"toy_agreement": "toy grammar"}
    rows = []
    for v in sorted(set().union(*(t[k] for k in tasks))):
        ind = t.get("induction", {}).get(v)
        steps = (f"{ind['steps_to_99']:.0f} ({ind['reached_99']}/{ind['n']})" if ind and ind["steps_to_99"] is not None
                 else "not reached")
        head = f"{fmt(ind['alignment'])} / {fmt(ind['entropy'])} / {fmt(ind['first_token'])}" if ind else "-"
        one = ind or next(t[k][v] for k in tasks if v in t[k])  # tokens/s: the induction runs'
        rows.append([f"`{v}`", *(acc_cell(t[k][v]) if v in t[k] else "-" for k in tasks), steps, head,
                     fmt(one["tokens_per_s"], ",.0f"), f"{one['params']:,}"])
    cols = ["variant", *(f"{names.get(k, k)} ({next(iter(t[k].values()))['acc_split']})" for k in tasks),
            "steps to 99%, induction", "induction head: align / entropy / first-token", "tokens/s", "params"]
    out = {"atlas": markdown_table(rows, cols)}
    heads = json.loads((results / "atlas_cpu_heads.json").read_text())["table"]["induction"]
    xavier = json.loads((results / "atlas_cpu_heads_xavier.json").read_text())["table"]["induction"]
    named = [*((f"`{v}`", heads[v]) for v in sorted(heads)),
             *((f"`{v}`, `attention.qkv_init=xavier`", xavier[v]) for v in sorted(xavier))]
    rows = [[name, acc_cell(a), f"{a['heads_90']:.1f} of {a['heads']}",
             f"{fmt(a['induction'])} ({a['induction_is_aligned']}/{a['n']})", fmt(a["alignment"])] for name, a in named]
    out["heads"] = markdown_table(rows, ["variant", "test accuracy", "heads for 90%", "induction score (= best-aligned)",
                                         "alignment"])
    return out


def accuracy_figure(table: dict, tasks: list[str], variants: list[str], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    acc = np.array([[table[t].get(v, {}).get("acc", np.nan) for t in tasks] for v in variants])
    fig, ax = plt.subplots(figsize=(1.3 * len(tasks) + 2.5, 0.36 * len(variants) + 1.4))
    im = ax.imshow(acc, cmap="viridis", vmin=np.nanmin(acc) if np.isfinite(acc).any() else 0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(tasks)), tasks)
    ax.set_yticks(range(len(variants)), variants)
    for i in range(len(variants)):
        for j in range(len(tasks)):
            if np.isfinite(acc[i, j]):
                ax.text(j, i, f"{acc[i, j]:.2f}", ha="center", va="center", fontsize=8,
                        color="black" if acc[i, j] > 0.6 * np.nanmax(acc) else "white")
    splits = {a["acc_split"] for t in tasks for a in table[t].values()}
    fig.colorbar(im, ax=ax, label="test accuracy (mean over seeds)" if splits == {"test"} else
                 "accuracy: test split, val where a task has none (mean over seeds)")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def recall_figure(rows: list[dict], variants: list[str], path: Path) -> None:
    """The best-aligned head of every variant on recall example 0, seed 0, last epoch."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import TwoSlopeNorm

    picks = {r["variant"]: r for r in rows if r["seed"] == 0}
    shown = [v for v in variants if v in picks]
    cols = 6
    fig, axes = plt.subplots(-(-len(shown) // cols), cols, figsize=(2.2 * cols, 2.35 * -(-len(shown) // cols)), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for ax, v in zip(axes.flat, shown):
        run = Path(picks[v]["run"])
        snaps = sorted((run / "maps").glob("epoch*.npz"))
        s = json.loads((run / "summary.json").read_text())
        align = s["attention_maps"]["alignment"]
        with np.load(snaps[-1]) as z:
            n = int(z["lengths"][0])
            w = z["weights"][align["layer"], 0, align["head"], :n, :n].astype(np.float32)
        signed = w.min() < -1e-6
        kw = ({"cmap": "RdBu_r", "norm": TwoSlopeNorm(0, vmin=min(w.min(), -1e-3), vmax=max(w.max(), 1e-3))} if signed
              else {"cmap": "viridis", "vmin": 0, "vmax": max(float(w.max()), 1e-6)})
        ax.imshow(w, **kw)
        ax.set_title(f"{v}\nL{align['layer']}H{align['head']} align {align['best']:.2f}", fontsize=8)
    fig.suptitle("recall: the best-aligned head of each variant (one example; rows: queries, columns: keys; "
                 "colour: 0..its largest weight, blue-red where signed)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    from attnexp import attention

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default=",".join(attention.registered()), help="comma list (default: all registered)")
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=4, help="trainer.max_epochs of every run")
    ap.add_argument("--runs", help="where the sweeps go, kept (default: a temporary folder, removed at the end)")
    ap.add_argument("--tag", default="")
    ap.add_argument("--reuse", action="store_true", help="read the finished sweeps under --runs instead of training")
    ap.add_argument("--docs", action="store_true", help="print docs/results.md's atlas tables from the result files")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides for every run, e.g. data.n_sentences=1000")
    args = ap.parse_args()
    if args.docs:
        return print("\n\n".join(docs_tables().values()))
    variants, tasks = args.variants.split(","), args.tasks.split(",")
    extra = list(args.overrides)
    table, per_run, walls = {}, {}, {}
    with scratch("atlas-", args.runs) as root:
        print(f"atlas: {len(variants)} variants x {len(tasks)} tasks x {args.seeds} seeds, {args.epochs} epochs each; "
              f"runs in {root}", flush=True)
        for task in tasks:
            walls[task] = 0.0 if args.reuse else round(sweep(task, variants, args.seeds, args.epochs, root, extra), 1)
            rows = [run_row(p.parent) for p in sorted((root / task).glob("*/summary.json"))]
            per_run[task] = rows
            table[task] = {v: aggregate([r for r in rows if r["variant"] == v]) for v in variants
                           if any(r["variant"] == v for r in rows)}
            print(f"{task}: {len(rows)} runs in {walls[task]:.0f} s", flush=True)

    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    md = markdown(table, tasks, variants)
    (RESULTS / "images").mkdir(parents=True, exist_ok=True)
    title = f"{args.seeds} seeds, {args.epochs} epochs, {device}"
    accuracy_figure(table, tasks, variants, RESULTS / "images" / f"atlas_accuracy{args.tag}.png", f"atlas: {title}")
    if "recall" in per_run:
        recall_figure(per_run["recall"], variants, RESULTS / "images" / f"atlas_recall{args.tag}.png")
    meta = {"device": device, "torch": torch.__version__, "seeds": args.seeds, "epochs": args.epochs,
            "overrides": args.overrides, "wall_s": walls, "total_wall_s": round(sum(walls.values()), 1),
            "runs_dir": args.runs}  # None: the runs were in a temporary folder, removed
    record = {**meta, "table": table, "runs": per_run, "made": provenance()}
    (RESULTS / f"atlas_{device}{args.tag}.json").write_text(json.dumps(record, indent=1) + "\n")
    took = "finished runs read again" if args.reuse else f"{meta['total_wall_s'] / 60:.0f} minutes"
    said = [f"--seeds {args.seeds}", f"--epochs {args.epochs}",
            *([f"--tasks {args.tasks}"] if args.tasks != ",".join(TASKS) else []),
            *([f"--variants {args.variants}"] if args.variants != ",".join(attention.registered()) else []),
            *([f"--tag {args.tag}"] if args.tag else []), *args.overrides]
    header = f"# Atlas ({title}; {took})\n\n`python scripts/studies/atlas.py {' '.join(said)}`\n"
    (RESULTS / f"atlas_{device}{args.tag}.md").write_text(header + md)
    print(header + md)


if __name__ == "__main__":
    main()
