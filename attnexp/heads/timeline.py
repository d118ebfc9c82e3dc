"""The heads over training: a light reading of every head (its per-head numbers on the fixed probe
batch, no pictures) on a step schedule that is dense early, where heads form (Olsson et al. 2022
see induction heads appear in a phase change within the first few hundred steps), appended to one
file a run (`<run>/maps/timeline.jsonl`).

The file: one JSON header line, then one line a reading, flushed as it is written, so a run killed
at any moment leaves every finished line (a torn last line is left out on reading). A resumed run
drops the readings its checkpoint had not reached and goes on appending. It is read as a stranger's
file: its size, its number of readings and every array's shape are checked before anything is built.

Where the heads and the run-level curves changed, and which heads formed: heads.changes.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from attnexp.config import layout
from attnexp.config.files import FileRefused, append_text, read_bytes
from attnexp.config.paths import whole

log = logging.getLogger("attnexp")
FILE = layout.TIMELINE
FORMAT = 1
MAX_BYTES = 256 * 2**20  # a stranger's file larger than this is refused before it is read
MAX_READINGS = 20_000  # maps.every_n_steps is held to this many readings a run, too
MAX_CELLS = 64 * 64  # layers x heads
DIGITS = 5  # values are written with this many decimals (the file stays small; 1e-5 is below any change)


class TimelineError(ValueError):
    """A timeline file that is not one attnexp wrote, or is past its limits: one line, naming it."""


# --- when ------------------------------------------------------------------------------------------

def schedule(total_steps: int, points: int, every_n_steps: int = 0) -> list[int]:
    """The steps a light reading is taken at (after that optimizer step): every `every_n_steps`
    steps if it is set, else `points` steps spaced evenly in log(step) between 1 and total_steps,
    dense early (1, 2, 3, 5, 8, ... for 40 points over 1,000 steps). Step 0, the initialisation, is
    always read."""
    total = max(1, int(total_steps))
    if every_n_steps > 0:  # the first MAX_READINGS of them (a run past that is told so by the callback)
        steps = list(range(every_n_steps, min(total, every_n_steps * (MAX_READINGS - 1)) + 1, every_n_steps))
        if total <= every_n_steps * (MAX_READINGS - 1):
            steps.append(total)
    else:
        steps = [*np.unique(np.round(np.geomspace(1, total, max(2, points))).astype(int)).tolist(), total]
    return [0, *sorted(set(int(s) for s in steps))][: MAX_READINGS]


# --- what ------------------------------------------------------------------------------------------

OPTIONAL = ("llc", "llc_std", "icl_plain")  # a reading's keys written only where they were measured


@dataclass
class Reading:
    step: int
    epoch: int
    values: dict[str, np.ndarray]  # name -> (L, H)
    loss: float | None = None  # the training loss of this step's batch
    probe_loss: float | None = None  # the mean next-token loss on the probe batch (language models)
    icl: float | None = None  # in-context score on the probe batch (`icl_score`)
    llc: float | None = None  # the local learning coefficient (heads.llc; maps.llc=true, at some readings)
    llc_std: float | None = None  # ...its standard deviation over the SGLD chains
    # the in-context score on plain held-out windows, where the probe's windows carry planted repeats
    # (data=text with data.repeat_fraction > 0: the probe's score is then read inside the planted copy)
    icl_plain: float | None = None

    def line(self) -> str:
        scalars = {k: (None if v is None or not math.isfinite(v) else round(float(v), DIGITS))
                   for k, v in (("loss", self.loss), ("probe_loss", self.probe_loss), ("icl", self.icl),
                                ("llc", self.llc), ("llc_std", self.llc_std), ("icl_plain", self.icl_plain))
                   if v is not None or k not in OPTIONAL}  # the LLC's keys only where it was estimated
        values = {k: np.round(np.nan_to_num(np.asarray(v, dtype=float)), DIGITS).tolist() for k, v in self.values.items()}
        return json.dumps({"step": int(self.step), "epoch": int(self.epoch), **scalars, "values": values},
                          separators=(",", ":"))


def icl_score(token_loss_BT: np.ndarray, lengths: list[int]) -> float | None:
    """Olsson et al.'s in-context learning score on the probe batch: the mean next-token loss over
    the last quarter of each example's positions minus that over its first quarter (their 500th vs
    50th token, for any length). Negative: later tokens are predicted better, from the context."""
    late, early = [], []
    for b, n in enumerate(lengths):
        k = (n - 1) // 4  # positions 0..n-2 predict tokens 1..n-1
        if k < 1:
            continue
        early.append(token_loss_BT[b, :k].mean())
        late.append(token_loss_BT[b, n - 1 - k: n - 1].mean())
    return float(np.mean(late) - np.mean(early)) if late else None


# --- the file --------------------------------------------------------------------------------------

class Writer:
    """Appends readings to `<maps>/timeline.jsonl`; each line is flushed to the OS as written. It keeps
    the readings as the file holds them (`timeline()`), so the run never reads its own file back.
    The header's layers x heads are those of the maps the first reading holds, not the model's
    config: a variant may give fewer maps than model.n_heads (single_head, dot_product: one a layer)."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.header: dict | None = None
        self.readings: list[Reading] = []

    def start(self, keep_through: int | None) -> None:
        """A fresh file at the first reading, or (a resumed run: `keep_through` = the last step its
        checkpoint had read) the earlier part's readings up to that step, the later ones (taken after
        the checkpoint, then lost with the run) dropped, so no step is in the file twice."""
        self.header, self.readings = None, []
        if keep_through is not None and self.path.is_symlink():
            raise TimelineError(f"{self.path}: a symbolic link where the heads timeline goes (not followed); move it "
                                f"away (this run goes on without a timeline)")
        if self.path.is_dir():
            raise TimelineError(f"{self.path}: a folder where the heads timeline goes; move it away (this run goes on "
                                f"without a timeline)")
        if keep_through is None:  # a fresh run in this folder: an earlier run's file is not part of it
            self.path.unlink(missing_ok=True)
        elif self.path.exists():
            try:
                old, dropped = salvage(self.path)
            except TimelineError as e:  # nothing of it can be continued: said, and the timeline starts again here
                log.warning("%s; the timeline starts again from this checkpoint (step %d): move the file away to keep "
                            "it", e, keep_through)
                self.path.unlink(missing_ok=True)
                return
            self.readings = [r for r in old.readings if r.step <= keep_through]
            if dropped:  # a damaged line: every whole reading before and after it kept, and said
                log.warning("%s: %s; kept the %d whole reading(s) up to step %d", self.path, dropped, len(self.readings),
                            keep_through)
            self._write(old.layers, old.heads)

    def _write(self, layers: int, heads: int) -> None:
        """The header and the readings kept, whole or not at all."""
        self.header = {"attnexp_timeline": FORMAT, "layers": int(layers), "heads": int(heads)}
        kept = [r.line() for r in self.readings]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with whole(self.path) as tmp:
                tmp.write_text("".join(line + "\n" for line in [json.dumps(self.header), *kept]))
        except FileRefused as e:
            raise TimelineError(f"{self.path}: {e}; this run goes on without a timeline") from None

    def append(self, reading: Reading) -> None:
        shape = next(iter(reading.values.values())).shape if reading.values else (0, 0)
        if self.header is None or (self.header["layers"], self.header["heads"]) != tuple(shape):
            if self.header is not None:  # the earlier part read a model of other sizes: not one timeline
                self.readings = []
            self._write(*shape)
        line = reading.line()
        try:
            append_text(self.path, line + "\n")  # the writing rule (config.files): one write, to the OS at once
        except FileRefused as e:
            raise TimelineError(f"{self.path}: {e}; this run goes on without a timeline") from None
        self.readings.append(_reading(line, self.header["layers"], self.header["heads"], self.path,
                                      len(self.readings) + 2))  # as written: rounded, as a reader of the file sees it

    def timeline(self) -> Timeline:
        h = self.header or {"layers": 0, "heads": 0}
        return Timeline(h["layers"], h["heads"], list(self.readings))


@dataclass
class Timeline:
    layers: int
    heads: int
    readings: list[Reading] = field(default_factory=list)

    @property
    def steps(self) -> np.ndarray:
        return np.array([r.step for r in self.readings], dtype=int)

    def curve(self, name: str) -> np.ndarray | None:
        """(N, L, H) of one quantity over the readings that hold it, or None if none does."""
        rows = [r.values[name] for r in self.readings if name in r.values]
        return np.stack(rows) if rows and len(rows) == len(self.readings) else None

    def scalar(self, name: str) -> np.ndarray:
        """(N,) of loss / probe_loss / icl / icl_plain / llc, NaN where a reading has none."""
        return np.array([np.nan if getattr(r, name) is None else getattr(r, name) for r in self.readings], dtype=float)

    def names(self) -> list[str]:
        return list(self.readings[0].values) if self.readings else []


def _text(path: Path) -> str:
    """The file's text by the one reading rule (a regular file, its size checked before it is read: a
    named pipe of that name is not waited on), undecodable bytes replaced (the line is then refused)."""
    try:
        return read_bytes(path, MAX_BYTES).decode("utf-8", errors="replace")
    except FileRefused as e:
        said = f"{e.size:,} bytes, past the {MAX_BYTES:,} a timeline may hold" if e.size is not None else str(e)
        raise TimelineError(f"{path}: {said}; not read") from None


def _header(line: str, path: Path) -> tuple[int, int]:
    try:
        header = json.loads(line)
    except (ValueError, RecursionError):  # a line nested 100,000 deep is not a header (it was a RecursionError traceback)
        header = None
    if not isinstance(header, dict) or header.get("attnexp_timeline") != FORMAT:
        raise TimelineError(f"{path}: not an attnexp timeline (its first line is not the header)")
    layers, heads = header.get("layers"), header.get("heads")
    if not (isinstance(layers, int) and isinstance(heads, int) and 0 < layers and 0 < heads and layers * heads <= MAX_CELLS):
        raise TimelineError(f"{path}: its header gives {layers!r} layers x {heads!r} heads; at most {MAX_CELLS} "
                            f"heads in all are read")
    return layers, heads


def read(path: Path | str) -> Timeline:
    """A run's timeline, checked as a stranger's file (module docstring); TimelineError otherwise."""
    return _parse(_text(Path(path)), Path(path), strict=True)[0]


def salvage(path: Path) -> tuple[Timeline, str | None]:
    """A resumed run's own timeline, damaged lines left out: (the whole readings in increasing steps,
    what was left out in a few words, or None). TimelineError when nothing of it can be read (not a
    file, too big, not a timeline's header)."""
    out, bad = _parse(_text(Path(path)), Path(path), strict=False)
    return out, f"{bad} damaged line(s) left out" if bad else None


def _parse(text: str, path: Path, strict: bool) -> tuple[Timeline, int]:
    """The readings of a timeline's text and how many lines were left out: `strict`, any damaged line
    or step out of order is TimelineError; else each such line is left out and counted."""
    first, _, rest = text.partition("\n")
    out, bad = Timeline(*_header(first, path)), 0
    lines = rest.split("\n")
    # the last element is "" after a whole last line; a killed run's last line may be cut short: left out
    for i, line in enumerate(lines[:-1]):
        if not line:
            continue
        if len(out.readings) >= MAX_READINGS:
            if strict:
                raise TimelineError(f"{path}: more than {MAX_READINGS:,} readings; not read")
            break
        try:
            r = _reading(line, out.layers, out.heads, path, i + 2)
            if out.readings and r.step <= out.readings[-1].step:
                raise TimelineError(f"{path}: its steps do not increase (a file written by two runs at once?)")
        except TimelineError:
            if strict:
                raise
            bad += 1
            continue
        out.readings.append(r)
    return out, bad


def _reading(line: str, layers: int, heads: int, path: Path, n: int) -> Reading:
    try:
        d = json.loads(line)
        if not all(type(d[k]) is int for k in ("step", "epoch")):  # true is no step 1, nor 5.7 step 5
            raise TypeError("step and epoch are whole numbers")
        values = {str(k): np.asarray(v, dtype=float) for k, v in d["values"].items()}
        num = lambda x: None if x is None else float(x)  # noqa: E731
        r = Reading(int(d["step"]), int(d["epoch"]), values,
                    *(num(d.get(k)) for k in ("loss", "probe_loss", "icl", "llc", "llc_std", "icl_plain")))
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):  # RecursionError: a line nested deep
        raise TimelineError(f"{path}: line {n} is not a reading") from None
    bad = [k for k, v in values.items() if v.shape != (layers, heads) or not np.isfinite(v).all()]
    if bad:
        name = "".join(ch if ch.isprintable() else "?" for ch in bad[0][:40])  # a stranger's name: one line, printable
        raise TimelineError(f"{path}: line {n}: {name} is not {layers} x {heads} finite numbers")
    return r
