"""`attnexp compare ... report=PATH.html`: one self-contained page (inline SVG figures, no script,
no network) a researcher can open, print or attach: the comparison table (groups of seeds with
mean, std, n, 95% interval and Welch's p against the best), the monitored metric over training
steps per group (mean line, seed band), final quality against throughput and against peak memory,
the per-head statistics the map callback logs compared across groups, how many heads carry 90% of
the importance and which roles the heads took per group, and every run with its
status and a link to its attention-map viewer. Failed, diverged, pruned and killed runs are
listed as such, never dropped."""

from __future__ import annotations

import html
import io
import os
import sys
import urllib.parse
from datetime import datetime
from pathlib import Path

import numpy as np

from attnexp.config import higher_is_better, layout
from attnexp.config.paths import write_whole
from attnexp.heads import quantities
from attnexp.heads.importance import SHARE, heads_for_share
from attnexp.maps import snapshot
from attnexp.results.compare import RUN_CELLS, Table, metric_cells, run_columns, status_counts, status_of, value
from attnexp.results.summary import Status

CSS = """body { font: 14px system-ui, sans-serif; margin: 24px; color: #222; max-width: 1200px; }
table { border-collapse: collapse; margin: 8px 0 20px; font-size: 13px; } th, td { border: 1px solid #ccc; padding: 3px 7px; }
th { background: #f3f3f3; } tr.best td { background: #fff6d6; } td.bad { color: #b22; } .note { color: #555; }
figure { margin: 10px 0 24px; } figcaption { color: #555; font-size: 13px; } svg { max-width: 100%; height: auto; }"""


def _svg(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None, "Format": None,
                                                                  "Type": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{html.escape(caption)}</figcaption></figure>"


def group_label(st: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in st.items()) or "all runs"


def curves(t: Table) -> str:
    """Each validation metric over steps: a line per group (the mean over its seeds), a band from
    the lowest to the highest seed."""
    import matplotlib.pyplot as plt

    keys = sorted({k for _, s in t.runs for h in (s.get("metrics") or {}).get("history") or [] for k in h
                   if k.startswith("val/")})
    keys = ([t.monitor] if t.monitor in keys else []) + [k for k in keys if k != t.monitor]
    if not keys:
        return ""
    keys = keys[:3]
    fig, axes = plt.subplots(1, len(keys), figsize=(5.2 * len(keys), 3.6), squeeze=False)
    for ax, key in zip(axes[0], keys):
        for color, (st, idx) in zip(plt.cm.tab10.colors * 3, t.groups()):
            hists = [[(h["step"], h[key]) for h in (t.runs[i][1].get("metrics") or {}).get("history") or [] if key in h]
                     for i in idx]
            hists = [h for h in hists if h]
            if not hists:
                continue
            n = min(len(h) for h in hists)
            steps = np.array([p[0] for p in hists[0][:n]])
            ys = np.array([[p[1] for p in h[:n]] for h in hists], dtype=float)
            ax.plot(steps, ys.mean(0), color=color, label=f"{group_label(st)} ({len(hists)})")
            if len(hists) > 1:
                ax.fill_between(steps, ys.min(0), ys.max(0), color=color, alpha=0.2)
        ax.set_xlabel("optimizer step")
        ax.set_ylabel(key)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    return _figure(_svg(fig), "Validation metrics over training: mean over a group's seeds (line) and the range of "
                              "its seeds (band); (n) = runs with a history.")


def tradeoffs(t: Table) -> str:
    """The monitored metric against throughput and against peak memory: a dot per run, a cross
    with error bars per group."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10.5, 3.8))
    for ax, key, label in ((axes[0], "tokens/s", "training tokens / s"), (axes[1], "memory MB", "peak memory (MB)")):
        for color, (st, idx) in zip(plt.cm.tab10.colors * 3, t.groups()):
            pts = [(x, y) for i in idx if (x := value(t.runs[i][1], key)) is not None and
                   (y := value(t.runs[i][1], "best")) is not None]
            if not pts:
                continue
            xs, ys = np.array(pts).T
            ax.scatter(xs, ys, color=color, alpha=0.5, s=18)
            ax.errorbar(xs.mean(), ys.mean(), xerr=xs.std() if len(xs) > 1 else None,
                        yerr=ys.std() if len(ys) > 1 else None, color=color, marker="x", markersize=9,
                        capsize=3, label=group_label(st))
        ax.set_xlabel(label)
        ax.set_ylabel(f"{t.monitor or 'best'} (best checkpoint)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    better = "higher" if higher_is_better(t.monitor or "val/loss") else "lower"
    return _figure(_svg(fig), f"Final quality ({better} is better) against throughput and peak memory: a dot per run, "
                              f"a cross per group (mean ± std over seeds).")


def say(line: str) -> None:
    print(f"attnexp compare: {line}", file=sys.stderr)


def _last_snapshot(run: dict, said: bool = False) -> snapshot.Snapshot | None:
    """A run's newest readable snapshot (snapshot.latest; what is left out is said once, `said`)."""
    maps = (run.get("attention_maps") or {}).get("dir")
    found = snapshot.latest(maps, None if said else say) if isinstance(maps, str) else None
    return snapshot.read(found) if found else None


def per_head_figure(t: Table) -> str:
    """The per-head quantities the report shows (heads.quantities), of the last maps of each run,
    over every head of every seed of a group."""
    import matplotlib.pyplot as plt

    per_group = []
    for st, idx in t.groups():
        vals: dict[str, list] = {}
        for i in idx:
            snap = _last_snapshot(t.runs[i][1])
            for name, a in quantities.shown("report", snap.analysis.scores if snap else {}).items():
                vals.setdefault(name, []).extend(a.ravel().tolist())
        per_group.append((st, vals))
    shown = [(n, label) for n, label in quantities.labels("report").items() if any(n in v for _, v in per_group)]
    if not shown:
        return ""
    fig, axes = plt.subplots(1, len(shown), figsize=(3.4 * len(shown), 3.4), squeeze=False)
    labels = [group_label(st) for st, _ in per_group]
    for ax, (name, title) in zip(axes[0], shown):
        data = [v.get(name, []) for _, v in per_group]
        pos = [i for i, d in enumerate(data) if d]
        ax.boxplot([data[i] for i in pos], positions=pos, widths=0.6)
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels([f"g{i + 1}" for i in range(len(labels))])
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    legend = "; ".join(f"g{i + 1} = {label}" for i, label in enumerate(labels))
    return _figure(_svg(fig), f"Per-head statistics of each run's last attention maps (every head of every seed of a "
                              f"group): {'; '.join(f'{t} (higher: {quantities.QUANTITIES[n].higher})' for n, t in shown)}. "
                              f"{legend}.")


def _last_analysis(run: dict) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(importance (L, H) or None, roles (L, H) or None) of a run's last snapshot."""
    snap = _last_snapshot(run, said=True)  # per_head_figure said what it left out
    return (None, None) if snap is None else (snap.analysis.scores.get("importance"), snap.analysis.roles)


def importance_and_roles(t: Table) -> str:
    """Per group: how many heads carry 90% of the total importance (heads.importance: the loss
    increase with each head silenced) in each run's last snapshot, the cumulative share of the
    importance against heads (most important first, mean over seeds), and how many heads took each
    role (heads.roles)."""
    import matplotlib.pyplot as plt

    rows, curves_, role_rows = [], [], []
    for st, idx in t.groups():
        found = [_last_analysis(t.runs[i][1]) for i in idx]
        imps = [imp for imp, _ in found if imp is not None]
        if imps:
            counts = [heads_for_share(imp, SHARE) for imp in imps]
            rows.append({"group": group_label(st), "runs": len(imps), "heads": imps[0].size,
                         "heads carrying 90%": f"{np.mean(counts):.1f} ± {np.std(counts):.1f}" if len(counts) > 1
                         else f"{counts[0]}", "range": f"{min(counts)}-{max(counts)}"})
            shares = [np.cumsum(v) / max(v.sum(), 1e-12) for v in
                      (np.sort(np.clip(imp.ravel(), 0, None))[::-1] for imp in imps if imp.size == imps[0].size)]
            curves_.append((group_label(st), np.mean(shares, 0)))
        names = [str(r) for _, roles in found if roles is not None for r in roles.ravel()]
        if names:
            role_rows.append({"group": group_label(st), **{k: names.count(k) for k in sorted(set(names))}})
    parts = []
    if rows:
        fig, ax = plt.subplots(figsize=(6, 3.4))
        for color, (label, c) in zip(plt.cm.tab10.colors * 3, curves_):
            ax.plot(np.arange(1, len(c) + 1), c, color=color, marker=".", label=label)
        ax.axhline(SHARE, color="grey", lw=0.8, ls="--")
        ax.set_xlabel("heads, most important first")
        ax.set_ylabel("share of the total importance")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        parts += [_table(list(rows[0]), rows),
                  _figure(_svg(fig), "Head importance (validation loss increase with one head silenced, each run's last "
                                     "epoch): the cumulative share carried by the most important heads, mean over a "
                                     "group's seeds; the dashed line is 90%.")]
    if role_rows:
        cols = ["group", *sorted({k for r in role_rows for k in r if k != "group"})]
        parts += ["<p class=note>Heads per role in each run's last snapshot, summed over a group's seeds "
                  "(attnexp.heads.roles):</p>", _table(cols, [{c: r.get(c, 0) for c in cols} for r in role_rows])]
    return "".join(parts)


def _table(cols: list[str], rows: list[dict], best_mark: bool = False) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = []
    for r in rows:
        cls = ' class="best"' if best_mark and r.get("_is_best") else ""
        cells = "".join(f"<td{' class=bad' if c == 'status' and str(r.get(c, '')) not in (Status.COMPLETED, '') else ''}>"
                        f"{html.escape(str(r.get(c, '')))}</td>" for c in cols)
        body.append(f"<tr{cls}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def file_href(target: Path, base: Path) -> str:
    """A link to a file, and only ever that: a path relative to `base` starting with ./ or ../, or
    a file: URL, percent-encoded, so no folder name (a summary.json from anywhere says where its
    maps are) can become a scheme such as javascript:."""
    try:
        rel = os.path.relpath(Path(target).resolve(), Path(base).resolve())
    except ValueError:  # another drive (Windows): an absolute file: URL
        return Path(target).resolve().as_uri()
    return urllib.parse.quote(rel if rel.startswith("..") else f"./{rel}", safe="/.")


def runs_table(t: Table, at: Path) -> str:
    cols = run_columns(t, tail=("memory MB", "maps", "error"))
    rows = []
    for (path, s), st in zip(t.runs, t.sets):
        best = (s.get("metrics") or {}).get("best") or {}
        maps = (s.get("attention_maps") or {}).get("dir")
        viewer = Path(maps) / layout.VIEWER if maps else None
        link = f'<a href="{html.escape(file_href(viewer, at.parent))}">viewer</a>' if viewer and viewer.is_file() else ""
        cells = {"run": html.escape(t.name(path)), **{k: html.escape(st.get(k, "")) for k in t.varying},
                 "status": html.escape(status_of(s)), "best": f"{best['value']:.4f}" if best else "",
                 **metric_cells(s, t.test_keys), **{c: html.escape(str(f(s))) for c, f in RUN_CELLS.items()}, "maps": link,
                 "error": html.escape((s.get("error") or "")[:160]) if s.get("status") != Status.COMPLETED else ""}
        bad = s.get("status") != Status.COMPLETED
        rows.append("<tr>" + "".join(f"<td{' class=bad' if bad and c == 'status' else ''}>{cells[c]}</td>" for c in cols)
                    + "</tr>")
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def write_report(path: Path, t: Table, cols: list[str], rows: list[dict], gcols: list[str], grows: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: smaller, searchable
    matplotlib.rcParams["text.parse_math"] = False  # labels hold override values: `$x^^y$` is text, not mathtext
    path = Path(path).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    counts = status_counts(s for _, s in t.runs)
    parts = [f"<h1>attnexp: {len(t.runs)} runs compared</h1>",
             f"<p class=note>{html.escape(', '.join(f'{n} {k}' for k, n in counts.items()))} · folder "
             f"{html.escape(str(t.root))} · {datetime.now():%Y-%m-%d %H:%M} · monitored: "
             f"{html.escape(t.monitor or 'each run its own')}</p>"]
    if grows:
        parts += ["<h2>Groups of seeds</h2>",
                  "<p class=note>mean ± std (n completed runs) of the best checkpoint's monitored value; the 95% interval "
                  "uses Student's t over seeds; <b>vs best</b> is Welch's t-test on that value against the best group (★): "
                  "\"~\" marks a difference within noise (p &gt; 0.05).</p>", _table(gcols, grows, best_mark=True)]
    parts += ["<h2>Training curves</h2>", curves(t), "<h2>Quality, throughput and memory</h2>", tradeoffs(t),
              "<h2>What the heads do</h2>", per_head_figure(t) or "<p class=note>no attention maps in these runs</p>",
              "<h2>Which heads matter</h2>", importance_and_roles(t) or "<p class=note>no head importance or roles in "
                                                                         "these runs (maps.importance=true)</p>",
              "<h2>Every run</h2>", runs_table(t, path)]
    page = (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>attnexp report</title><style>{CSS}</style>"
            f"</head><body>{''.join(parts)}</body></html>")
    write_whole(path, page)
