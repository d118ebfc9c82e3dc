#!/usr/bin/env python
"""The pretrained all-MiniLM-L6-v2 on 20 Newsgroups: the fine-tune preset
(`experiment=newsgroups_minilm`) and a frozen-encoder baseline (`optim.freeze_encoder=true`: only
the classifier trains), each scored on the bydate test split, beside TF-IDF + linear SVM, the
from-scratch preset and BERT-base; and how the encoder's attention moved while it fine-tuned
(each head's Jensen-Shannon divergence from its pretrained maps, per epoch: the maps' `drift`).

    python scripts/studies/finetune.py                                   # both runs, raw posts (~1.5 h on 2 cores)
    python scripts/studies/finetune.py --runs frozen --settings raw,clean # some of them
    python scripts/studies/finetune.py --smoke                          # tiny, to check the script
    python scripts/studies/finetune.py --runs finetune --keep /tmp/bench-finetune-x/frozen-raw   # reuse a finished run
    python scripts/studies/finetune.py --choose --minutes 1.5   # the fine-tune chosen on validation (a GPU: ~8 min)

Writes scripts/results/finetune_minilm_<device>.{json,md} and images/finetune_drift.png; --choose
writes finetune_choice_<device>.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import numpy as np
import torch

from attnexp.api import compose, evaluate, load_run, train
from attnexp.maps import snapshot

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from common import RESULTS, markdown_table, own_data, provenance, scratch  # noqa: E402

SETTINGS = {"raw": [], "clean": ["data.remove=[headers,footers,quotes]"]}
RUNS = {"finetune": [], "frozen": ["optim.freeze_encoder=true", "optim.lr=3e-3", "optim.warmup_steps=20"]}
# --choose: the candidates and the rule, fixed here before any of them ran. Each fine-tunes on raw
# posts at the model's full 512 tokens (length-bucketed batches), up to 6 epochs of warmup + cosine,
# keeping the epoch with the best validation accuracy; no test. The candidate whose kept checkpoint
# has the highest validation accuracy (a tie: the earlier one here) is scored on the test split once,
# and the same setting is trained once on cleaned posts and scored on their test split once. The
# order is the prior's (BERT's range tops out at 5e-5; a 6-layer model takes more): a call cut off at
# its time limit keeps the candidates that finished.
GRID = {"lr1e-4": ["optim.lr=1e-4"], "lr5e-5": ["optim.lr=5e-5"], "lr2e-4": ["optim.lr=2e-4"]}
GRID_BASE = ["data.max_len=512", "data.batch_size=32", "data.bucket=true", "trainer.max_epochs=6",
             "optim.warmup_steps=100", "maps.enabled=false", "test=false"]
LITERATURE = {"BERT-base, fine-tuned, 128 tokens (BertGCN's table, Lin et al. 2021)": {
    "own preprocessing": 0.853}}  # TextGCN's cleaned corpus: neither of our two columns


def reference() -> dict[str, dict[str, float]]:
    """Bydate test accuracy to compare with, raw posts / headers, footers and quotes removed: the
    TF-IDF + SVM baseline and the from-scratch preset as this repo's scripts computed them (each
    file's command in scripts/results/README.md), and a figure from the literature, cited."""
    out = {}
    base, choice = RESULTS / "newsgroups_baseline.json", RESULTS / "newsgroups_choice.json"
    if base.is_file():
        out["TF-IDF + linear SVM, the same split (newsgroups_baseline.json)"] = {
            t: r["test_acc"] for t, r in json.loads(base.read_text()).items() if t in ("raw", "clean")}
    if choice.is_file():
        chosen = json.loads(choice.read_text())["chosen_on_mean_val"]
        out["from-scratch preset, experiment=newsgroups (newsgroups_choice.json)"] = {
            t: chosen[t]["test_acc"] for t in ("raw", "clean")}
    return {**out, **LITERATURE}


def reference_lines(ref: dict, digits: int = 4) -> list[str]:
    """The comparison figures as Markdown list items: raw / cleaned, or the literature's own corpus."""
    return [f"- {k}: " + (" / ".join(f"{v[s]:.{digits}f}" if s in v else "-" for s in ("raw", "clean"))
                          if "raw" in v or "clean" in v else f"{v['own preprocessing']:.3f} on TextGCN's cleaned corpus, "
                                                             f"neither column") for k, v in ref.items()]


def grid_run(tag: str, setting: str, args, out_root: Path, seed: int | None = None) -> dict:
    """One candidate trained (test=false; `seed`: other than the preset's): its best validation
    accuracy, epochs and time."""
    overrides = [*([f"seed={seed}"] if seed is not None else []), "experiment=newsgroups_minilm", "logger=csv",
                 "trainer.enable_progress_bar=false",
                 f"model.init=hf:{args.model}", f"data.path={args.data}", *SETTINGS[setting], *GRID_BASE, *GRID[tag],
                 f"trainer.max_time=00:00:{int(args.minutes):02d}:{round(60 * (args.minutes % 1)):02d}", *args.overrides]
    if args.smoke:
        overrides += ["data.limit=64", "data.max_len=32", "trainer.max_epochs=2", "data.batch_size=16"]
    t0 = time.perf_counter()
    s = train(load_run(compose(overrides, out_root / f"{tag}-{setting}{'' if seed is None else f'-seed{seed}'}")))
    row = {"candidate": tag, "setting": setting, "seed": s["seed"], "status": s["status"],
           "best_val_acc": (s["metrics"]["best"] or {}).get("value"), "best_epoch": best_epoch(s["checkpoints"]["best"]),
           "epochs": s["epochs"], "steps": s["steps"], "train_time_s": s["train_time_s"],
           "wall_s": round(time.perf_counter() - t0, 1), "tokens_per_s": s["tokens_per_s"], "device": s["device"],
           "checkpoint": s["checkpoints"]["best"], "overrides": overrides}
    print(json.dumps(row, indent=1), flush=True)
    return row


def best_epoch(checkpoint: str | None) -> int | None:
    """The epoch of a kept checkpoint, from its name (best-epochNN.ckpt)."""
    m = re.search(r"epoch(\d+)", Path(checkpoint).name) if checkpoint else None
    return int(m.group(1)) if m else None


def tested(row: dict, baseline: dict | None = None) -> dict:
    """The test split, read once: the kept checkpoint of `row` scored by `attnexp eval`, and each
    post's prediction (its predictions.json) compared pair by pair with the baseline's on the same
    posts (scripts/paired.py: McNemar's exact test, a paired bootstrap interval)."""
    from paired import compare

    e = evaluate(row["checkpoint"], split="test", data_overrides=own_data(row["checkpoint"]))
    m, kept = e["metrics"]["test"], json.loads((Path(e["run_dir"]) / e["predictions"]).read_text())
    paired = None
    if baseline is not None:
        if baseline["label"] != kept["label"]:
            raise SystemExit("finetune.py: the baseline's test posts are not these (newsgroups_baseline_predictions.json "
                             "was written on other data: rerun scripts/studies/newsgroups.py --baseline-only)")
        paired = compare(baseline["pred"], kept["pred"], kept["label"])
    return {**row, "test_acc": m.get("test/acc"), "test_f1_macro": m.get("test/f1_macro"), "paired_vs_baseline": paired}


def choose_on_validation(args, out: Path) -> dict:
    """GRID's candidates on raw posts, the best on validation tested once, then the same on cleaned
    posts; the result file is rewritten after every step (a call cut off keeps what finished)."""
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"cpu-{torch.get_num_threads()}threads"
    result = {"device": device, "torch": torch.__version__, "rule": "highest best-epoch val/acc on raw posts; "
              "earlier in GRID on a tie; test read once for the chosen setting, raw and cleaned",
              "grid": GRID, "base": GRID_BASE, "candidates": [], "reference": reference()}
    with scratch("bench-choice-", args.runs_in) as out_root:
        return choose_in(args, out, result, out_root)


def choose_in(args, out: Path, result: dict, out_root: Path) -> dict:
    """choose_on_validation with its runs in `out_root`."""
    stem = out / f"finetune_choice_{'gpu' if torch.cuda.is_available() else 'cpu'}{'_smoke' if args.smoke else ''}"

    def save() -> None:
        result["made"] = provenance(runs=[out_root])  # every run's test reads
        stem.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
        stem.with_suffix(".md").write_text(choice_markdown(result))

    for tag in GRID:
        result["candidates"].append(grid_run(tag, "raw", args, out_root))
        save()
    done = [r for r in result["candidates"] if r["best_val_acc"] is not None]
    best = max(done, key=lambda r: r["best_val_acc"])  # max keeps the first of equals: GRID's order
    base = baseline_predictions(args.smoke)
    result["chosen"] = {"raw": tested(best, base.get("raw"))}
    save()
    # the chosen setting again with other seeds: a claim against the baseline needs every seed's paired test
    result["seeds"] = [result["chosen"]["raw"]]
    for seed in args.more_seeds:
        result["seeds"].append(tested(grid_run(best["candidate"], "raw", args, out_root, seed=seed), base.get("raw")))
        save()
    result["verdict_raw"] = verdict_of(result["seeds"])
    save()
    result["chosen"]["clean"] = tested(grid_run(best["candidate"], "clean", args, out_root), base.get("clean"))
    save()
    print(choice_markdown(result))
    return result


def baseline_predictions(smoke: bool) -> dict:
    """TF-IDF + SVM's prediction for each test post, raw and cleaned (newsgroups.py --baseline-only);
    {} for a smoke run (other posts) or where the file is missing."""
    path = RESULTS / "newsgroups_baseline_predictions.json"
    return {} if smoke or not path.is_file() else json.loads(path.read_text())


def verdict_of(seeds: list[dict]) -> dict:
    """The seeds' spread and what the docs may say against the baseline (paired.verdict)."""
    from paired import verdict

    accs = [r["test_acc"] for r in seeds if r.get("test_acc") is not None]
    paired = [r["paired_vs_baseline"] for r in seeds if r.get("paired_vs_baseline")]
    return {"seeds": [r.get("seed") for r in seeds], "test_acc": accs,
            "mean": round(float(np.mean(accs)), 4) if accs else None,
            "sd": round(float(np.std(accs, ddof=1)), 4) if len(accs) > 1 else None,
            "verdict": verdict(paired) if len(paired) == len(seeds) and paired else "not compared"}


def choice_markdown(result: dict) -> str:
    lines = [f"# all-MiniLM-L6-v2 fine-tuned on 20 Newsgroups, chosen on validation ({result['device']})", "",
             "`python scripts/studies/finetune.py --choose`: " + " ".join(result["base"]), "",
             f"Rule: {result['rule']}.", ""]
    lines.append(markdown_table([[r["candidate"], r["setting"], f"{r['best_val_acc'] or 0:.4f}", r["best_epoch"], r["epochs"],
                                  f"{r['train_time_s']:.0f} s", f"{r['tokens_per_s']:,.0f}"] for r in result["candidates"]],
                                ["candidate", "posts", "best val acc", "its epoch", "epochs run", "train time", "tokens/s"]))
    chosen = result.get("chosen", {})
    if chosen:
        lines += ["", "The chosen setting on the test split (read once each):", ""]
        lines.append(markdown_table([[r["candidate"], s, f"{r['best_val_acc'] or 0:.4f}", f"{r['test_acc']:.4f}",
                                      f"{r['test_f1_macro']:.4f}", f"{r['train_time_s']:.0f} s"] for s, r in chosen.items()],
                                    ["candidate", "posts", "val acc", "test acc", "macro-F1", "train time"]))
    if result.get("seeds"):
        pv = lambda r: r.get("paired_vs_baseline") or {}  # noqa: E731
        lines += ["", "The chosen setting's seeds against TF-IDF + SVM on the same raw test posts (McNemar's exact "
                      "test on the posts one of the two gets right; a paired bootstrap 95% interval of the difference):", ""]
        lines.append(markdown_table([[r.get("seed"), f"{r['test_acc']:.4f}", pv(r).get("b_only", "-"),
                                      pv(r).get("a_only", "-"), f"{pv(r)['p']:.3g}" if pv(r) else "-",
                                      f"{pv(r)['diff']:+.4f} {pv(r)['ci95']}" if pv(r) else "-"] for r in result["seeds"]],
                                    ["seed", "test acc", "posts only it gets right", "only the baseline", "McNemar p",
                                     "difference [95%]"]))
        v = result.get("verdict_raw") or {}
        lines += ["", f"Seeds: {v.get('mean')} ± {v.get('sd')} over {len(v.get('test_acc', []))}; against the baseline: "
                      f"**{v.get('verdict')}** (\"above\" only if every seed's paired test and accuracy say so)."]
    lines += ["", "For comparison (bydate test accuracy, raw / cleaned):", ""]
    lines += reference_lines(result["reference"])
    return "\n".join(lines) + "\n"


def drift_by_epoch(maps_dir: Path) -> dict[int, list[list[float]]]:
    """epoch -> (L, H) mean JS divergence of each head's maps from its start (pretrained) maps."""
    out = {}
    for path in snapshot.files(maps_dir):
        stats = snapshot.read(path).analysis.scores
        if "drift" in stats:
            out[int(path.stem[len("epoch"):])] = stats["drift"].round(4).tolist()
    return out


def one(name: str, setting: str, args, out_root: Path) -> dict:
    overrides = ["experiment=newsgroups_minilm", "logger=csv", "trainer.enable_progress_bar=false",
                 f"model.init=hf:{args.model}", f"data.path={args.data}", *SETTINGS[setting], *RUNS[name], *args.overrides]
    if args.smoke:
        overrides += ["data.limit=64", "data.max_len=32", "trainer.max_epochs=2", "data.batch_size=16"]
    t0 = time.perf_counter()
    s = train(load_run(compose(overrides, out_root / f"{name}-{setting}")))
    return row_of(s, name, setting, overrides, round(time.perf_counter() - t0, 1))


def kept(run_dir: Path) -> dict:
    """The row of a finished run of this script (its folder is named <run>-<setting>)."""
    s = json.loads((run_dir / "summary.json").read_text())
    name, setting = run_dir.name.split("-", 1)
    return row_of(s, name, setting, s["overrides"], None)


def row_of(s: dict, name: str, setting: str, overrides: list[str], wall_s: float | None) -> dict:
    test = s["metrics"]["test"]
    row = {"run": name, "setting": setting, "status": s["status"], "test_acc": test.get("test/acc"),
           "test_f1_macro": test.get("test/f1_macro"), "best_val_acc": (s["metrics"]["best"] or {}).get("value"),
           "epochs": s["epochs"], "train_time_s": s["train_time_s"], "wall_s": wall_s,
           "tokens_per_s": s["tokens_per_s"], "n_params": s["model"]["n_params"], "overrides": overrides,
           "drift": drift_by_epoch(Path(s["run_dir"]) / "maps"), "run_dir": s["run_dir"]}
    print(json.dumps({k: v for k, v in row.items() if k != "drift"}, indent=1), flush=True)
    return row


def drift_figure(rows: list[dict], path: Path) -> None:
    """Per layer, the mean drift of its heads after each epoch; and every head after the last."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tuned = next(r for r in rows if r["run"] == "finetune" and r["drift"])
    epochs = sorted(tuned["drift"])
    per_layer = np.array([np.mean(tuned["drift"][e], axis=1) for e in epochs]).T  # (L, E)
    last = np.array(tuned["drift"][epochs[-1]])  # (L, H)
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.6), gridspec_kw={"width_ratios": [1, 2]})
    if len(epochs) == 1:  # one epoch: the layers side by side
        a.bar(range(len(per_layer)), per_layer[:, 0], color="tab:blue")
        a.set_xlabel(f"layer (after epoch {epochs[0]})")
        a.set_xticks(range(len(per_layer)))
    else:
        for layer, values in enumerate(per_layer):
            a.plot(epochs, values, marker="o", label=f"layer {layer}")
        a.set_xlabel("epoch")
        a.set_xticks(epochs)
        a.legend(fontsize=7)
    a.set_ylabel("mean JS divergence from pretrained")
    a.grid(alpha=0.3)
    im = b.imshow(last, cmap="viridis", aspect="auto")
    b.set_xlabel("head")
    b.set_ylabel("layer")
    b.set_title(f"after epoch {epochs[-1]}: each head", fontsize=10)
    fig.colorbar(im, ax=b, label="JS divergence")
    fig.suptitle(f"all-MiniLM-L6-v2 fine-tuned on 20 Newsgroups ({tuned['setting']}): how far its attention moved",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(rows: list[dict], device: str, args) -> str:
    lines = [f"# all-MiniLM-L6-v2 on 20 Newsgroups ({device})", "",
             "`python scripts/studies/finetune.py" + (" " + " ".join(args.overrides) if args.overrides else "") + "`", ""]
    cells = [[r["run"], r["setting"], "-" if r["test_acc"] is None else f"{r['test_acc']:.3f}",
              "-" if r["test_f1_macro"] is None else f"{r['test_f1_macro']:.3f}", f"{r['best_val_acc'] or 0:.3f}", r["epochs"],
              f"{r['train_time_s'] / 60:.1f} min", f"{r['tokens_per_s']:,.0f}"] for r in rows]
    lines.append(markdown_table(cells, ["run", "posts", "test acc", "macro-F1", "best val acc", "epochs", "train time",
                                        "tokens/s"]))
    lines += ["", "For comparison (bydate test accuracy, raw / cleaned):", ""]
    lines += reference_lines(reference(), digits=3)
    for r in rows:
        if r["drift"]:
            layers = len(next(iter(r["drift"].values())))
            lines += ["", f"Drift of {r['run']} ({r['setting']}), mean over each layer's heads, per epoch:", "",
                      markdown_table([[e, *(f"{np.mean(layer):.4f}" for layer in d)] for e, d in sorted(r["drift"].items())],
                                     ["epoch", *(f"layer {i}" for i in range(layers))])]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", default="finetune,frozen")
    ap.add_argument("--settings", default="raw")
    ap.add_argument("--model", default=str(REPO.parent / "shared" / "models" / "all-MiniLM-L6-v2"))
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "20newsgroups"))
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script, measures nothing")
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--runs-in", default=None, metavar="DIR", help="train the runs in DIR and keep them "
                    "(default: a temporary folder, removed at the end)")
    ap.add_argument("--keep", nargs="*", default=[], type=Path,
                    help="finished run folders of this script (<run>-<setting>) to report beside the new runs")
    ap.add_argument("--retable", type=Path, default=None, metavar="JSON",
                    help="write this result file's table again (its rows, today's references; no training)")
    ap.add_argument("--choose", action="store_true", help="GRID's candidates, the best on validation tested once")
    ap.add_argument("--minutes", type=float, default=2.0, help="--choose: each candidate's training time limit")
    ap.add_argument("--more-seeds", default="1,2", help="--choose: the chosen setting trained again with these seeds "
                    "(with its own run, 3 seeds), each compared pair by pair with the baseline")
    ap.add_argument("overrides", nargs="*", help="extra Hydra overrides for every run")
    args = ap.parse_args()
    args.more_seeds = [int(x) for x in args.more_seeds.split(",") if x.strip()]
    if args.choose:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        choose_on_validation(args, Path(args.out))
        return
    if args.retable:
        saved = json.loads(args.retable.read_text())
        saved["reference"] = reference()
        args.retable.write_text(json.dumps(saved, indent=1) + "\n")
        args.retable.with_suffix(".md").write_text(markdown(saved["rows"], args.retable.stem.rsplit("_", 1)[-1], args))
        return
    with scratch("bench-finetune-", args.runs_in) as out_root:
        compared(args, out_root)


def compared(args, out_root: Path) -> None:
    """Each of --runs fine-tuned (or frozen) in `out_root`, beside --keep's: the table and the figure."""
    runs = [r for r in args.runs.split(",") if r]
    rows = [one(name, setting, args, out_root) for setting in args.settings.split(",") for name in runs]
    rows += [kept(d) for d in args.keep]
    device = "gpu" if torch.cuda.is_available() else "cpu"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tag = "_smoke" if args.smoke else ""
    record = {"rows": rows, "reference": reference(), "made": provenance(runs=[out_root, *args.keep])}
    (out / f"finetune_minilm_{device}{tag}.json").write_text(json.dumps(record, indent=1) + "\n")
    (out / f"finetune_minilm_{device}{tag}.md").write_text(markdown(rows, device, args))
    if any(r["run"] == "finetune" and r["drift"] for r in rows):
        (out / "images").mkdir(exist_ok=True)
        drift_figure(rows, out / "images" / f"finetune_drift{tag}.png")
    print(markdown(rows, device, args))


if __name__ == "__main__":
    main()
