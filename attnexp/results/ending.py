"""The block a run ends with (printed by `attnexp train`): where it wrote, how it ended, its best
and test metrics, its time and throughput, where its maps and viewer are. From the summary alone."""

from __future__ import annotations

from pathlib import Path

from attnexp.config import higher_is_better, layout


def best_epoch(s: dict) -> int | None:
    best = (s.get("metrics") or {}).get("best") or {}
    hist = [h for h in (s.get("metrics") or {}).get("history") or [] if best.get("monitor") in h]
    if not hist:
        return None
    pick = max if higher_is_better(best["monitor"]) else min
    return pick(hist, key=lambda h: h[best["monitor"]])["epoch"]


def _rel(path: str | None, root: Path) -> str:
    if not path:
        return ""
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return str(path)


def test_line(test: dict, best: dict | None) -> str:
    """The best checkpoint's scores: on the test split (test/*), or on validation where the data has
    none (best_val/*), said once; and why the rescored monitor differs from the best's value."""
    on_test = any(k.startswith("test/") for k in test)
    line = "  test     " + " · ".join(f"{k.split('/', 1)[-1]} {v:.4f}" for k, v in test.items())
    line += " (the test split)" if on_test else " (no test split: the best checkpoint rescored on validation)"
    if best and not on_test:
        again = test.get(f"best_val/{best['monitor'].split('/', 1)[-1]}")
        if again is not None and abs(again - best["value"]) > 5e-4:
            line += (f"; {best['monitor']} {again:.4f} here, {best['value']:.4f} when it was chosen: validation was "
                     f"limited then (trainer.limit_val_batches), whole now")
    return line


def end_of_run(s: dict) -> str:
    """The block a run ends with, from its summary."""
    root = Path(s["run_dir"])
    lines = [f"attnexp: run {s['status']} · {root}"]
    if s.get("error"):
        lines.append(f"  why      {s['error']}")
    best = (s.get("metrics") or {}).get("best")
    if best:
        at = best_epoch(s)
        lines.append(f"  best     {best['monitor']} {best['value']:.4f}" + (f" at epoch {at}" if at is not None else "") +
                     f" ({_rel(best['checkpoint'], root)})")
    test = (s.get("metrics") or {}).get("test") or {}
    if test:
        lines.append(test_line(test, best))
    if s.get("test_skipped"):
        lines.append(f"  test     not run: {s['test_skipped']}")
    if s.get("train_time_s") is not None:
        tps = f" · {s['tokens_per_s']:,.0f} tokens/s" if s.get("tokens_per_s") else ""
        lines.append(f"  time     {time_said(s)} · {s.get('steps', 0)} steps · {s.get('epochs', 0)} epochs{tps} · "
                     f"{s.get('device', '')}")
    for cmd in s.get("dashboards") or []:
        lines.append(f"  view     {cmd}")
    maps = (s.get("attention_maps") or {}).get("dir")
    written = (s.get("attention_maps") or {}).get("written")  # what the run wrote, not what its config asked for
    if not isinstance(written, list):  # a record from before attnexp kept one
        written = [layout.VIEWER, layout.gif(0)] if maps and (Path(maps) / layout.VIEWER).exists() else []
    shown = [_rel(str(Path(maps) / layout.VIEWER), root)] if maps and layout.VIEWER in written else []
    shown += [f"{_rel(maps, root)}/{layout.GIFS}"] if maps and any(str(w).endswith(".gif") for w in written) else []
    if shown:
        al = (s.get("attention_maps") or {}).get("alignment")
        best_head = f" · best head L{al['layer']}H{al['head']} (alignment {al['best']:.2f})" if al else ""
        lines.append(f"  maps     {' · '.join(shown)}{best_head}")
    heads = heads_line(s, root)
    if heads:
        lines.append(heads)
    return "\n".join(lines)


def heads_line(s: dict, root: Path) -> str | None:
    """What the heads timeline found: the first formations (heads.changes) and its picture."""
    t = (s.get("attention_maps") or {}).get("timeline")
    if not isinstance(t, dict):
        return None
    formed = [f for f in t.get("formations") or [] if isinstance(f, dict)]
    from attnexp.heads.roles import SAID

    said = [f"L{f.get('layer')} H{f.get('head')} {SAID.get(str(f.get('role')), f.get('role'))} head at step {f.get('step')}"
            for f in formed[:3]]
    if len(formed) > 3:
        said.append(f"{len(formed) - 3} more")
    if said:
        what = "formed: " + ", ".join(said)
    else:
        why = t.get("change_points_skipped")  # the reason, with the fix (e.g. pip install 'attnexp[timeline]')
        what = f"change points not sought ({str(why)[:120]})" if why else "no head changed role abruptly"
    picture = Path(str(t.get("file", ""))).with_name(layout.TIMELINE_PICTURE)
    return f"  heads    {what} · {t.get('readings', 0)} readings · {_rel(str(picture), root)}"


def time_said(s: dict) -> str:
    """The run's times, said so that neither reads as part of the other: a resumed run's training
    time counts every session, its wall time only this command's, so training can exceed "in all"."""
    train, wall = s["train_time_s"], s.get("wall_time_s", 0)
    if s.get("resumed_from"):
        n = len(s["resumed_from"]) + 1
        return f"{train:.1f} s training over {n} sessions · this session {wall:.1f} s in all (since the resume)"
    return f"{train:.1f} s training ({wall:.1f} s in all)"
