"""`python -m attnexp compare DIR...`: the runs under some folders side by side, one row each, from
their summary.json files: the settings that differ between them, status, the best checkpoint's
score, test metrics, time and throughput. Reads JSON only (no torch import), so it answers at once.

TensorBoard and wandb already draw the curves of many runs together; this is the table a sweep
ends with, in the terminal or pasted into a note."""

from __future__ import annotations

import csv
import json
import os
import socket
import sys
from pathlib import Path

from attnexp.config import higher_is_better  # no torch import there either

USAGE = """usage: python -m attnexp compare [DIR ...] [sort=KEY] [csv=PATH]

  DIR       folders holding runs (a multirun/<date>/<time> sweep, outputs/, one run); every
            summary.json below them is read. Default: the newest sweep under ./multirun.
  sort=KEY  order rows by a column: best (the default, each run's checkpoint.monitor, best
            first), a metric such as test/acc or val/loss, or time, tokens/s, run
  csv=PATH  also write the table as CSV

example:
  python -m attnexp train -m attention=causal,bidirectional model.n_layers=2,4
  python -m attnexp compare                 # the four runs of that sweep
"""

class CompareError(ValueError):
    pass


def find_summaries(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for p in paths:
        if p.is_file() and p.name == "summary.json":
            found.append(p)
        elif p.is_dir():
            found += sorted(p.rglob("summary.json"))
        else:
            raise CompareError(f"{p}: no such folder or summary.json")
    if not found:
        raise CompareError(f"no summary.json under {', '.join(map(str, paths))}; train a run first "
                           "(python -m attnexp train) or point at its output folder")
    return found


def newest_sweep(root: Path = Path("multirun")) -> Path:
    sweeps = [d for d in root.glob("*/*") if d.is_dir()] if root.is_dir() else []
    if not sweeps:
        raise CompareError("no folder given and no sweep under ./multirun; "
                           "usage: python -m attnexp compare DIR [DIR ...]")
    return max(sweeps, key=lambda d: d.stat().st_mtime)


def settings(s: dict) -> dict[str, str]:
    """What the run was asked for: its command-line overrides, else its config-group choices."""
    if s.get("overrides") is not None:
        out = {}
        for o in s["overrides"]:
            key, _, value = o.lstrip("+~").partition("=")
            out[key] = value
        return out
    return {k: str(v) for k, v in (s.get("choices") or {}).items() if v is not None}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def status_of(s: dict) -> str:
    """The recorded status; a `running` run whose process is gone (same host) was killed outright."""
    status = s.get("status", "?")
    if status != "running":
        return status
    hist = (s.get("metrics") or {}).get("history") or []
    at = f" (epoch {hist[-1]['epoch']})" if hist else " (before its first epoch)"
    if s.get("host") == socket.gethostname() and isinstance(s.get("pid"), int) and not alive(s["pid"]):
        return "killed" + at
    return "running" + at


def rows_of(summaries: list[tuple[Path, dict]]) -> tuple[list[str], list[dict]]:
    sets = [settings(s) for _, s in summaries]
    keys = sorted({k for st in sets for k in st})
    varying = [k for k in keys if len({st.get(k) for st in sets}) > 1] or (keys if len(sets) == 1 else [])
    test_keys = sorted({k for _, s in summaries for k in ((s.get("metrics") or {}).get("test") or {})})
    dirs = [p.parent for p, _ in summaries]
    root = Path(os.path.commonpath(dirs)) if len(dirs) > 1 else dirs[0].parent
    rows = []
    for (path, s), st in zip(summaries, sets):
        name = str(path.parent.relative_to(root))  # runs named by where they differ
        m = s.get("metrics") or {}
        best = m.get("best") or {}
        row = {"run": name, **{k: st.get(k, "") for k in varying}, "status": status_of(s)}
        row["best"] = f"{best['monitor']}={best['value']:.4f}" if best else ""
        row["_best"] = (best.get("value"), higher_is_better(best.get("monitor", "val/loss"))) if best else None
        for k in test_keys:
            v = (m.get("test") or {}).get(k)
            row[k] = f"{v:.4f}" if isinstance(v, (int, float)) else ""
        row["epochs"] = s.get("epochs", "")
        row["time"] = f"{s['train_time_s']:.1f}s" if s.get("train_time_s") is not None else ""
        row["tokens/s"] = f"{s['tokens_per_s']:.0f}" if s.get("tokens_per_s") else ""
        row["params"] = (s.get("model") or {}).get("n_params", "")
        if s.get("status") not in (None, "completed", "running"):
            row["error"] = (s.get("error") or "")[:80]
        rows.append(row)
    cols = ["run", *varying, "status", "best", *test_keys, "epochs", "time", "tokens/s", "params"]
    if any("error" in r for r in rows):
        cols.append("error")
    return cols, rows


def sort_rows(rows: list[dict], key: str) -> list[dict]:
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
    present = sorted((k for k in keyed if k[0] is not None), key=lambda k: (k[0], k[1]))
    return [r for _, _, r in present] + [r for v, _, r in keyed if v is None]  # runs without it last


def markdown(cols: list[str], rows: list[dict]) -> str:
    cells = [[str(r.get(c, "")) for c in cols] for r in rows]
    width = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    line = lambda vals: "| " + " | ".join(v.ljust(w) for v, w in zip(vals, width)) + " |"
    return "\n".join([line(cols), line(["-" * w for w in width]), *(line(row) for row in cells)])


def compare_cli(argv: list[str]) -> int:
    if any(a in ("-h", "--help", "help") for a in argv):
        print(USAGE)
        return 0
    opts, paths = {}, []
    for a in argv:  # a run folder may hold "=" (Hydra's sweep dirs): only sort= and csv= are options
        key, eq, value = a.partition("=")
        if eq and key in ("sort", "csv"):
            opts[key] = value
        else:
            paths.append(Path(a))
    try:
        paths = paths or [newest_sweep()]
        summaries = []
        skipped = 0
        for p in find_summaries(paths):
            try:
                s = json.loads(p.read_text())
            except json.JSONDecodeError as e:
                print(f"attnexp compare: skipping {p}: not valid JSON ({e})", file=sys.stderr)
                continue
            if s.get("status") == "config_error" and not s.get("sweep") and p not in paths:
                skipped += 1  # a single run that never started: nothing to compare (a sweep's stay, as its grid's holes)
                continue
            summaries.append((p, s))
        if skipped:
            print(f"attnexp compare: left out {skipped} single run(s) that stopped on a config error", file=sys.stderr)
        if not summaries:
            raise CompareError("none of the summary.json files could be read")
        cols, rows = rows_of([(p.resolve(), s) for p, s in summaries])
        key = opts.get("sort", "best")
        if key not in cols and key != "best":
            raise CompareError(f"sort={key!r} is not a column; choose one of: {', '.join(c for c in cols if c != 'error')}")
        rows = sort_rows(rows, key)
    except CompareError as e:
        print(f"attnexp compare: {e}", file=sys.stderr)
        return 2
    print(markdown(cols, rows))
    if "csv" in opts:
        with open(opts["csv"], "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)
        print(f"\nwrote {opts['csv']}")
    return 0
