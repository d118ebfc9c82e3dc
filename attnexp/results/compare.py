"""Runs side by side (`python -m attnexp compare DIR...`), from their summary.json files. One row a
run: the settings that differ between them, status, the best checkpoint's score, test metrics,
time and throughput. Where runs differ only in `seed`, one row a
group instead: each metric's mean, standard deviation, n and 95% interval over the seeds, the best
group marked and, for every other group, whether its difference from the best is within noise
(Welch's t-test over seeds, p > 0.05). `report=PATH.html` draws the same as a self-contained page
(attnexp.report). Reads JSON only (no torch import), so it answers at once."""

from __future__ import annotations

import csv
import math
import os
import socket
import sys
from collections import Counter
from pathlib import Path

from attnexp.config import higher_is_better, layout, split_override  # no torch import there either
from attnexp.config.paths import write_whole
from attnexp.results import summary
from attnexp.results.significance import t_quantile, welch_p
from attnexp.results.summary import KILLED, Status

IGNORED = ("seed", "resume")  # settings that do not make a run another experiment


class CompareError(ValueError):
    pass


def find_summaries(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for p in paths:
        if p.is_file() and p.name == layout.SUMMARY:
            found.append(p)
        elif p.is_dir():
            found += sorted(p.rglob(layout.SUMMARY))
        else:
            raise CompareError(f"{p}: no such folder or summary.json")
    if not found:
        raise CompareError(f"no summary.json under {', '.join(map(str, paths))}; train a run first "
                           "(python -m attnexp train) or point at its output folder")
    return found


def newest_sweep(root: Path) -> Path:
    """The newest sweep with runs under `root` (the command line gives paths.sweep_dir); a sweep that
    ran nothing (no summary.json below it) is never the one picked."""
    sweeps = [d for d in root.glob("*/*") if d.is_dir() and next(d.rglob(layout.SUMMARY), None)] if root.is_dir() else []
    if not sweeps:
        raise CompareError(f"no folder given and no sweep with runs under ./{root}; "
                           "usage: python -m attnexp compare DIR [DIR ...]")
    return max(sweeps, key=lambda d: d.stat().st_mtime)


def settings(s: dict) -> dict[str, str]:
    """What the run was asked for: its command-line overrides, else its config-group choices."""
    if s.get("overrides") is not None:
        return dict(split_override(o) for o in s["overrides"])
    return {k: str(v) for k, v in (s.get("choices") or {}).items() if v is not None}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def standing(s: dict) -> tuple[str, str]:
    """(status, where it stopped): the recorded status, or KILLED for a `running` run whose process is
    gone (same host); a run not finished says its epoch (' (epoch 3)'), a finished one nothing."""
    status = s.get("status", "?")
    if status != Status.RUNNING:
        return status, ""
    hist = (s.get("metrics") or {}).get("history") or []
    at = f" (epoch {hist[-1]['epoch']})" if hist else " (before its first epoch)"
    if s.get("host") == socket.gethostname() and isinstance(s.get("pid"), int) and not alive(s["pid"]):
        return KILLED, at
    return Status.RUNNING.value, at


def status_of(s: dict) -> str:
    """The status as the table shows it: 'completed', 'killed (epoch 3)'."""
    return "".join(standing(s))


def status_counts(summaries) -> dict[str, int]:
    """How many runs stand in each status (killed runs apart from running ones), in the order met."""
    return dict(Counter(standing(s)[0] for s in summaries))


def peak_mb(s: dict) -> float | None:
    mem = s.get("peak_memory") or {}
    return mem.get("cuda_max_allocated_mb") or mem.get("cpu_max_rss_mb")


class Table:
    """The runs read from summary.json files, what differs between them, and their groups."""

    def __init__(self, summaries: list[tuple[Path, dict]]):
        self.runs = summaries
        sets = [settings(s) for _, s in summaries]
        keys = sorted({k for st in sets for k in st})
        self.varying = [k for k in keys if len({st.get(k) for st in sets}) > 1] or (keys if len(sets) == 1 else [])
        self.sets = sets
        dirs = [p.parent for p, _ in summaries]
        self.root = Path(os.path.commonpath(dirs)) if len(dirs) > 1 else dirs[0].parent
        self.test_keys = sorted({k for _, s in summaries for k in ((s.get("metrics") or {}).get("test") or {})})
        monitors = {((s.get("metrics") or {}).get("best") or {}).get("monitor") for _, s in summaries} - {None}
        self.monitor = monitors.pop() if len(monitors) == 1 else None
        self.group_keys = [k for k in self.varying if k not in IGNORED]

    def name(self, path: Path) -> str:
        return str(path.parent.relative_to(self.root)) if path.parent != self.root else path.parent.name

    def groups(self) -> list[tuple[dict, list[int]]]:
        """(settings, run indices) for every distinct setting of the group keys, in first-seen order."""
        out: dict[tuple, list[int]] = {}
        for i, st in enumerate(self.sets):
            out.setdefault(tuple(st.get(k, "") for k in self.group_keys), []).append(i)
        return [(dict(zip(self.group_keys, key)), idx) for key, idx in out.items()]

    def grouped(self) -> bool:
        return any(len(idx) > 1 for _, idx in self.groups())


def formations(s: dict) -> list[dict]:
    """The run's head formations (heads.changes: summary.json's attention_maps.timeline), by step."""
    t = (s.get("attention_maps") or {}).get("timeline")
    found = t.get("formations") if isinstance(t, dict) else None
    return [f for f in found if isinstance(f, dict) and isinstance(f.get("step"), int)] if isinstance(found, list) else []


def first_formed(s: dict, role: str) -> int | None:
    """The step the run's first head of `role` formed at, or None."""
    return min((f["step"] for f in formations(s) if f.get("role") == role), default=None)


def formed_said(s: dict) -> str:
    """Each role's first formation: 'previous 96 · induction 162'."""
    firsts: dict[str, int] = {}
    for f in formations(s):
        firsts.setdefault(str(f.get("role")), f["step"])
    return " · ".join(f"{r} {step}" for r, step in sorted(firsts.items(), key=lambda kv: kv[1])[:4])


def value(s: dict, key: str) -> float | None:
    if key == "induction step":
        v = first_formed(s, "induction")
        return None if v is None else float(v)
    m = s.get("metrics") or {}
    v = {"best": (m.get("best") or {}).get("value"), "time": s.get("train_time_s"), "tokens/s": s.get("tokens_per_s"),
         "memory MB": peak_mb(s)}.get(key, (m.get("test") or {}).get(key))
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None


# A run table's per-run cells, formatted once for the terminal (`compare`), its CSV and the HTML report
RUN_CELLS = {
    "epochs": lambda s: s.get("epochs", ""),
    "time": lambda s: f"{s['train_time_s']:.1f}s" if s.get("train_time_s") is not None else "",
    "tokens/s": lambda s: f"{s['tokens_per_s']:.0f}" if s.get("tokens_per_s") else "",
    "memory MB": lambda s: f"{peak_mb(s):.0f}" if peak_mb(s) else "",
    "params": lambda s: (s.get("model") or {}).get("n_params", ""),
}


def metric_cells(s: dict, keys: list[str], which: str = "test") -> dict[str, str]:
    """The run's metrics `keys` (its test metrics, or `which`: final, its last validation), 4 decimals
    ('' where it has none)."""
    got = (s.get("metrics") or {}).get(which) or {}
    return {k: f"{got[k]:.4f}" if isinstance(got.get(k), (int, float)) else "" for k in keys}


def run_columns(t: Table, *, best: str = "best", tail: tuple[str, ...] = ("params",)) -> list[str]:
    """A run table's columns: the run, the settings that vary, status, the best value, the test
    metrics, epochs, time, throughput, then `tail`."""
    return ["run", *t.varying, "status", best, *t.test_keys, "epochs", "time", "tokens/s", *tail]


def rows_of(summaries: list[tuple[Path, dict]]) -> tuple[list[str], list[dict]]:
    """One row a run."""
    t = Table(summaries)
    rows = []
    for (path, s), st in zip(summaries, t.sets):
        m = s.get("metrics") or {}
        best = m.get("best") or {}
        row = {"run": t.name(path), **{k: st.get(k, "") for k in t.varying}, "status": status_of(s)}
        row["best"] = f"{best['monitor']}={best['value']:.4f}" if best else ""
        row["_best"] = (best.get("value"), higher_is_better(best.get("monitor", "val/loss"))) if best else None
        row["_kind"] = measured_as(s)
        row.update({**metric_cells(s, t.test_keys), **{c: f(s) for c, f in RUN_CELLS.items()}})
        row["heads formed"] = formed_said(s)
        if s.get("status") not in (None, Status.COMPLETED, Status.RUNNING):
            row["error"] = (s.get("error") or "")[:80]
        rows.append(row)
    kinds = {r["_kind"] for r in rows}
    if len(kinds) > 1:  # runs whose numbers mean different things are ranked apart, each group said
        for r in rows:
            r["ranked with"] = r["_kind"]
    cols = run_columns(t, tail=("params", *(["heads formed"] if any(r["heads formed"] for r in rows) else [])))
    if len(kinds) > 1:
        cols.insert(cols.index("best"), "ranked with")
    if any("error" in r for r in rows):
        cols.append("error")
    return cols, rows


def stats(xs: list[float]) -> dict:
    n = len(xs)
    if not n:
        return {"n": 0, "mean": None, "std": None, "lo": None, "hi": None}
    mean = sum(xs) / n
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else 0.0
    half = t_quantile(n - 1) * std / math.sqrt(n) if n > 1 else 0.0
    return {"n": n, "mean": mean, "std": std, "lo": mean - half, "hi": mean + half}


def group_rows(t: Table) -> tuple[list[str], list[dict]]:
    """One row a group of seeds: mean ± std (n) and the 95% interval of the monitored metric, the
    test metrics, time, throughput, memory; the best group, and p vs the best one."""
    higher = higher_is_better(t.monitor or "val/loss")
    rows = []
    for st, idx in t.groups():
        runs = [t.runs[i][1] for i in idx]
        ok = [s for s in runs if s.get("status") == Status.COMPLETED]
        statuses = status_counts(runs)
        row = {**st, "runs": ", ".join(f"{n} {k}" for k, n in statuses.items()), "_values": {}}
        for key in ("best", *t.test_keys, "time", "tokens/s", "memory MB", "induction step"):
            xs = [v for s in ok if (v := value(s, key)) is not None]
            row["_values"][key] = xs
            row[f"_{key}"] = stats(xs)
        rows.append(row)
    scored = [r for r in rows if r["_best"]["n"]]
    if scored:
        best = (max if higher else min)(scored, key=lambda r: r["_best"]["mean"])
        best["_is_best"] = True
        for r in rows:
            r["_p"] = None if r is best else welch_p(r["_values"]["best"], best["_values"]["best"])
    label = t.monitor or "best"
    vs = f"vs best ({label})"  # a p-value says which metric it tests (README quoted val/loss's beside test accuracies)
    fmt = lambda d, p=4: "" if d["mean"] is None else f"{d['mean']:.{p}f} ± {d['std']:.{p}f} ({d['n']})"
    for r in rows:
        b = r["_best"]
        r[label] = fmt(b) + (" ★" if r.get("_is_best") else "")
        r["95% interval"] = "" if b["lo"] is None or b["n"] < 2 else f"[{b['lo']:.4f}, {b['hi']:.4f}]"
        p = r.get("_p")
        r[vs] = "best" if r.get("_is_best") else "" if p is None else f"p={p:.3f}" + (" ~" if p > 0.05 else "")
        for k in t.test_keys:
            r[k] = fmt(r[f"_{k}"])
        r["time"] = "" if r["_time"]["mean"] is None else f"{r['_time']['mean']:.1f}s"
        r["tokens/s"] = "" if r["_tokens/s"]["mean"] is None else f"{r['_tokens/s']['mean']:.0f}"
        r["memory MB"] = "" if r["_memory MB"]["mean"] is None else f"{r['_memory MB']['mean']:.0f}"
        ind = r["_induction step"]
        r["induction step"] = "" if ind["mean"] is None else f"{ind['mean']:.0f} ± {ind['std']:.0f} ({ind['n']} formed)"
    rows.sort(key=lambda r: (r["_best"]["mean"] is None, -(r["_best"]["mean"] or 0) if higher else (r["_best"]["mean"] or 0)))
    cols = [*t.group_keys, "runs", label, "95% interval", vs, *t.test_keys, "time", "tokens/s", "memory MB",
            *(["induction step"] if any(r["induction step"] for r in rows) else [])]
    return cols, rows


def measured_as(s: dict) -> str:
    """What a run's best value is a measure of: its monitor and its task (a next-token loss and a
    masked-token loss, or a loss and an accuracy, do not rank against each other)."""
    task = s.get("task") or {}
    monitor = ((s.get("metrics") or {}).get("best") or {}).get("monitor") or "-"
    return " · ".join(str(x) for x in (monitor, task.get("name"), task.get("objective")) if x)


def sort_rows(rows: list[dict], key: str) -> list[dict]:
    """Rows by `key`, best first; runs measured differently (`measured_as`) are ranked within their
    own kind, the kinds in first-seen order."""
    order = {k: i for i, k in enumerate(dict.fromkeys(r.get("_kind", "") for r in rows))}

    def value(r):
        if key == "best":
            b = r["_best"]
            return None if b is None or b[0] is None else (0, -b[0] if b[1] else b[0])
        raw = r.get(key, "")
        try:
            v = float(str(raw).rstrip("s"))
        except ValueError:
            return None if raw in ("", None) else (1, str(raw))  # text after numbers
        higher = "/" in key and higher_is_better(key)  # metrics and tokens/s; settings, time: ascending
        return (0, -v if higher else v)

    keyed = [(value(r), i, r) for i, r in enumerate(rows)]
    present = sorted((k for k in keyed if k[0] is not None), key=lambda k: (order[k[2].get("_kind", "")], k[0], k[1]))
    return [r for _, _, r in present] + [r for v, _, r in keyed if v is None]  # runs without it last


def markdown(cols: list[str], rows: list[dict]) -> str:
    cells = [[str(r.get(c, "")) for c in cols] for r in rows]
    width = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    line = lambda vals: "| " + " | ".join(v.ljust(w) for v, w in zip(vals, width)) + " |"
    return "\n".join([line(cols), line(["-" * w for w in width]), *(line(row) for row in cells)])


def write_csv(path: Path, cols: list[str], rows: list[dict]) -> None:
    def write(tmp: Path) -> None:
        with open(tmp, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)

    write_whole(path, write)


def read(paths: list[Path]) -> list[tuple[Path, dict]]:
    """Every usable summary.json under `paths`; each one that is not (malformed, unreadable, a
    folder of that name) is left out with one line on stderr saying why, and the rest compared."""
    summaries, skipped = [], 0
    for p in find_summaries(paths):
        try:
            s = summary.read(p)
        except summary.SummaryError as e:
            print(f"attnexp compare: left out {p}: {e}", file=sys.stderr)
            continue
        if s.get("kind") == "eval":  # `attnexp eval`'s record in a run's eval/ folder: not a run of its own
            continue
        if s.get("status") == Status.CONFIG_ERROR and not s.get("sweep") and p not in paths:
            skipped += 1  # a single run that never started: nothing to compare (a sweep's stay, as its grid's holes)
            continue
        summaries.append((p.resolve(), s))
    if skipped:
        print(f"attnexp compare: left out {skipped} single run(s) that stopped on a config error", file=sys.stderr)
    if not summaries:
        raise CompareError("none of the summary.json files could be read")
    return summaries


def tables(summaries: list[tuple[Path, dict]], sort: str = "best") -> tuple[Table, list[str], list[dict], list[str], list[dict]]:
    """The per-run table (sorted) and, when seeds repeat a setting, the group table."""
    t = Table(summaries)
    cols, rows = rows_of(summaries)
    last = [(s.get("metrics") or {}).get("final") or {} for _, s in summaries]  # each run's last validation
    if sort not in cols and any(isinstance(f.get(sort), (int, float)) for f in last):  # a column when sorted by
        cols.insert(cols.index("best") + 1, sort)
        for r, (_, s) in zip(rows, summaries):
            r.update(metric_cells(s, [sort], "final"))
    if sort not in cols and sort != "best":
        said = sorted({k for f in last for k in f})
        raise CompareError(f"sort={sort!r} is not a column; choose one of: {', '.join(c for c in cols if c != 'error')}"
                           + (f"; or a validation metric: {', '.join(said)}" if said else ""))
    rows = sort_rows(rows, sort)
    gcols, grows = group_rows(t) if t.grouped() else ([], [])
    return t, cols, rows, gcols, grows


def write_sweep_table(sweep_dir: Path) -> Path:
    """results.md and results.csv in a finished sweep's folder: the table `compare` prints."""
    t, cols, rows, gcols, grows = tables(read([sweep_dir]))
    text = markdown(cols, rows)
    if grows:
        text = markdown(gcols, grows) + "\n\n" + text
        write_csv(sweep_dir / layout.SWEEP_GROUPS_CSV, gcols, grows)
    write_whole(sweep_dir / layout.SWEEP_TABLE, text + "\n")
    write_csv(sweep_dir / layout.SWEEP_CSV, cols, rows)
    return sweep_dir / layout.SWEEP_TABLE
