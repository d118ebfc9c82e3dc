"""What the terminal shows: a line per epoch where the output is not a terminal (a log file, a
cluster's stdout) instead of progress-bar redraws, log lines that do not collide with a live bar,
and the block a run ends with: where it wrote, how it ended, its best and test metrics, its time
and throughput, where its maps and viewer are."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import lightning as L

from attnexp.config import higher_is_better

log = logging.getLogger("attnexp")


def interactive() -> bool:
    return sys.stdout.isatty()


class EpochLines(L.Callback):
    """One line an epoch (for non-interactive output), e.g.
    `epoch 3/8 · step 252 · train/acc 0.31 · train/loss_epoch 2.27 · val/acc 0.317 · val/loss 2.18 · 1.4 s`.
    Written when the next epoch starts (or training ends): the module logs an epoch's training
    metrics after the callbacks' on_train_epoch_end."""

    def __init__(self):
        self.t0, self.epoch = None, None

    def _line(self, trainer):
        if self.epoch is None or not trainer.is_global_zero:
            return
        m = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith(("train/", "val/", "align/best"))}
        shown = " · ".join(f"{k} {v:.4g}" for k, v in sorted(m.items()) if k != "train/loss")
        total = trainer.max_epochs if trainer.max_epochs and trainer.max_epochs > 0 else "?"
        log.info("epoch %d/%s · step %d · %s · %.1f s", self.epoch + 1, total, trainer.global_step, shown,
                 time.perf_counter() - self.t0)
        self.epoch = None

    def on_train_epoch_start(self, trainer, pl_module):
        self._line(trainer)
        self.t0, self.epoch = time.perf_counter(), trainer.current_epoch

    def on_train_end(self, trainer, pl_module):
        self._line(trainer)


class _BarSafe(logging.Handler):
    """Writes through tqdm.write, which lifts a live progress bar off the line first (a log line
    printed while a bar is drawn otherwise lands in the middle of it)."""

    def __init__(self, inner: logging.StreamHandler):
        super().__init__(inner.level)
        self.inner = inner
        self.setFormatter(inner.formatter)

    def emit(self, record):
        from tqdm import tqdm

        try:
            tqdm.write(self.format(record), file=self.inner.stream)
        except Exception:
            self.handleError(record)


def bar_safe_logging() -> None:
    """Where a bar is drawn (a terminal), log lines go around it."""
    root = logging.getLogger()
    for i, h in enumerate(list(root.handlers)):
        if type(h) is logging.StreamHandler and h.stream in (sys.stdout, sys.stderr) and h.stream.isatty():
            root.handlers[i] = _BarSafe(h)


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


def report(s: dict) -> str:
    """The block a run ends with (printed by `attnexp train`)."""
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
        lines.append("  test     " + " · ".join(f"{k} {v:.4f}" for k, v in test.items()))
    if s.get("train_time_s") is not None:
        tps = f" · {s['tokens_per_s']:,.0f} tokens/s" if s.get("tokens_per_s") else ""
        lines.append(f"  time     {s['train_time_s']:.1f} s training ({s.get('wall_time_s', 0):.1f} s in all) · "
                     f"{s.get('steps', 0)} steps · {s.get('epochs', 0)} epochs{tps} · {s.get('device', '')}")
    maps = (s.get("attention_maps") or {}).get("dir")
    if maps and (Path(maps) / "viewer.html").exists():
        al = (s.get("attention_maps") or {}).get("alignment")
        best_head = f" · best head L{al['layer']}H{al['head']} (alignment {al['best']:.2f})" if al else ""
        lines.append(f"  maps     {_rel(str(Path(maps) / 'viewer.html'), root)} · {_rel(maps, root)}/evolution_ex*.gif{best_head}")
    return "\n".join(lines)
