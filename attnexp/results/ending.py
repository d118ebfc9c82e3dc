"""The block a run ends with (printed by `attnexp train`): where it wrote, how it ended, its best
and test metrics, its time and throughput, where its maps and viewer are. From the summary alone."""

from __future__ import annotations

from pathlib import Path

from attnexp.config import higher_is_better


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
    if test:  # best_val/*: the data has no test split, so the best checkpoint was scored on validation
        label = "test    " if any(k.startswith("test/") for k in test) else "best val"
        lines.append(f"  {label} " + " · ".join(f"{k} {v:.4f}" for k, v in test.items()))
    if s.get("train_time_s") is not None:
        tps = f" · {s['tokens_per_s']:,.0f} tokens/s" if s.get("tokens_per_s") else ""
        lines.append(f"  time     {s['train_time_s']:.1f} s training ({s.get('wall_time_s', 0):.1f} s in all) · "
                     f"{s.get('steps', 0)} steps · {s.get('epochs', 0)} epochs{tps} · {s.get('device', '')}")
    maps = (s.get("attention_maps") or {}).get("dir")
    if maps and (Path(maps) / "viewer.html").exists():
        al = (s.get("attention_maps") or {}).get("alignment")
        best_head = f" · best head L{al['layer']}H{al['head']} (alignment {al['best']:.2f})" if al else ""
        viewer = _rel(str(Path(maps) / "viewer.html"), root)
        lines.append(f"  maps     {viewer} · {_rel(maps, root)}/evolution_ex*.gif{best_head}")
    return "\n".join(lines)
