"""A snapshot of the probe set's maps on disk, the same for the training callback (epochNNN) and
`attnexp maps`: written by `save`, found by `latest` and read back by `read` (the report, a resumed
run's viewer, the scripts). The layout (file names, array names) and the size checks of a
stranger's file live here alone."""

from __future__ import annotations

import math
import re
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from attnexp.config import MapsConfig
from attnexp.config.paths import whole
from attnexp.heads import quantities
from attnexp.heads.quantities import STAT_PREFIX
from attnexp.heads.record import Analysis

if TYPE_CHECKING:
    from attnexp.heads.probe import Probe

START = -1  # the snapshot taken before training, kept in the viewer's epochs as -1 and shown as "start"


def stem(epoch: int) -> str:
    """A training snapshot's file stem: start or epochNNN(.npz, _exK.png)."""
    return "start" if epoch == START else f"epoch{epoch:03d}"


def npz(maps_dir: Path, epoch: int) -> Path:
    """A training snapshot's file (start.npz, epochNNN.npz)."""
    return Path(maps_dir) / f"{stem(epoch)}.npz"


def example_png(maps_dir: Path, stem_: str, b: int) -> Path:
    """The grid picture of example `b` of the snapshot `stem_` (<stem>_exK.png)."""
    return Path(maps_dir) / f"{stem_}_ex{b}.png"


def files(maps_dir: Path | str) -> list[Path]:
    """A run's snapshots, oldest first (epochNNN.npz)."""
    d = Path(maps_dir)
    return sorted(d.glob("epoch*.npz")) if d.is_dir() else []


class SnapshotError(ValueError):
    """A file that is not a snapshot attnexp could have written, with the reason in a few words."""


# A snapshot holds the probe set's maps, (L, B, H, T, T) fp16, and small arrays beside them. What a
# stranger's file may make a reader allocate is bounded before anything is inflated: each member's
# size is read from the zip directory and its npy header, checked against the shapes the file's own
# small members imply (tokens (B, T), a statistic (L, H)), and against these limits.
MAX_SMALL_BYTES = 8 << 20  # tokens, lengths, statistics, roles, rollout: a few kB each in practice
MAX_WEIGHTS_BYTES = 1 << 30  # the maps themselves: 12 layers x 12 heads x 4 examples x 512^2 fp16 is 302 MB
MAX_SMALL_TOTAL = 64 << 20  # every member but the weights together: many members each under the limit add up
MAX_MEMBERS = 512  # about 40 quantities, 4 arrays an example for up to 64 examples, a few more
_FIXED = {"weights", "lengths", "tokens", "roles", "layer_importance", "skipped", "notes", "epoch", "step"}
_PER_EXAMPLE = re.compile(r"(rollout|flow|relevance_pred|relevance_pred_scores|relevance_true|relevance_true_scores)_ex\d{1,3}")


def expected(member: str) -> bool:
    """Whether `member` (without .npy) is one `save` writes: a stranger's other members are never read."""
    return (member in _FIXED or member.startswith(STAT_PREFIX) or quantities.of_member(member) is not None
            or _PER_EXAMPLE.fullmatch(member) is not None)


def _headers(z: zipfile.ZipFile) -> dict[str, tuple[tuple[int, ...], np.dtype, int]]:
    """member name (without .npy) -> (shape, dtype, declared uncompressed bytes) of the members a
    snapshot has, from the zip directory and the first bytes of each: nothing is inflated beyond its
    npy header, and a member `save` never writes is not opened at all."""
    out = {}
    infos = z.infolist()
    if len(infos) > MAX_MEMBERS:
        raise SnapshotError(f"it holds {len(infos):,} members; a snapshot holds at most {MAX_MEMBERS}")
    for info in infos:
        if not info.filename.endswith(".npy"):
            raise SnapshotError(f"it holds {info.filename[:60]!r}, which is not an array")
        if not expected(info.filename[:-4]):
            continue
        with z.open(info) as f:
            version = np.lib.format.read_magic(f)
            read = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}.get(version)
            if read is None:
                raise SnapshotError(f"{info.filename[:60]!r} is an npy file of version {version}, which attnexp does not write")
            shape, _, dtype = read(f)
            header = f.tell()
        if dtype.hasobject:
            raise SnapshotError(f"{info.filename[:60]!r} holds Python objects; a snapshot holds plain arrays")
        if info.file_size != header + math.prod(shape) * dtype.itemsize:
            raise SnapshotError(f"{info.filename[:60]!r} says {shape} of {dtype} but holds {info.file_size:,} bytes")
        out[info.filename[:-4]] = (tuple(shape), dtype, info.file_size)
    return out


def check_sizes(path: Path | str, max_weights: int = MAX_WEIGHTS_BYTES) -> None:
    """SnapshotError unless `path` is an npz whose members are no bigger than its shapes imply (the
    weights no bigger than `max_weights` bytes: a resumed run passes its own model's and probe's)."""
    try:
        with zipfile.ZipFile(path) as z:
            members = _headers(z)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as e:
        if isinstance(e, SnapshotError):
            raise
        raise SnapshotError(f"not an .npz file ({str(e)[:80] or type(e).__name__})") from None
    big = {k: v for k, v in members.items() if v[2] > MAX_SMALL_BYTES and k != "weights"}
    if big:
        k = next(iter(big))
        raise SnapshotError(f"{k!r} would take {big[k][2]:,} bytes; a snapshot's {k} takes a few kB")
    small = sum(v[2] for k, v in members.items() if k != "weights")
    if small > MAX_SMALL_TOTAL:
        raise SnapshotError(f"its {len(members) - ('weights' in members)} small members would take {small:,} bytes "
                            f"together; a snapshot's take a few MB")
    if "weights" in members:
        shape, _, size = members["weights"]
        tokens = members.get("tokens", ((), None, 0))[0]
        stat = next((v[0] for k, v in members.items() if k.startswith(STAT_PREFIX)), None)
        implied = (stat[0], tokens[0], stat[1], tokens[1], tokens[1]) if stat and len(stat) == 2 and len(tokens) == 2 else None
        if size > MAX_WEIGHTS_BYTES or (implied is not None and shape != implied):
            raise SnapshotError(f"its weights are {shape} ({size:,} bytes), not the (layers, examples, heads, tokens, "
                                f"tokens) = {implied} its own tokens and statistics imply")
        if size > max_weights:
            raise SnapshotError(f"its weights would take {size:,} bytes; this run's maps take at most {max_weights:,}")


@contextmanager
def opened(path: Path | str, max_weights: int = MAX_WEIGHTS_BYTES):
    """The snapshot's arrays (np.load without pickle), once `check_sizes` passed."""
    check_sizes(path, max_weights)
    try:
        with np.load(path, allow_pickle=False) as z:
            yield z
    except (ValueError, OSError, zipfile.BadZipFile) as e:
        raise SnapshotError(f"unreadable ({str(e)[:80]})") from None


@dataclass
class Snapshot:
    """One snapshot read back: the analysis of the heads it holds (`analysis`, as heads.analysis.read_heads
    returned it: every per-head quantity by name in its `scores`; roles, layer
    importance, rollout / flow, relevance, what was skipped), and, when asked for, the weights
    (L, B, H, T, T)."""

    path: Path
    analysis: Analysis = field(default_factory=Analysis)
    weights: np.ndarray | None = None
    epoch: int | None = None
    step: int | None = None


def read(path: Path | str, weights: bool = False, max_weights: int = MAX_WEIGHTS_BYTES) -> Snapshot:
    """The snapshot at `path` (SnapshotError if it is not one attnexp could have written); the
    weights are inflated only when asked for, and only up to `max_weights` bytes. Every reader of a
    snapshot comes through here."""
    with opened(path, max_weights) as z:
        found = {m for m in z.files if expected(m)}
        per_head = {name: np.asarray(z[m], dtype=float) for m in sorted(found) if (name := quantities.of_member(m))}
        per_head.update({m[len(STAT_PREFIX):]: np.asarray(z[m], dtype=float) for m in sorted(found)
                         if m.startswith(STAT_PREFIX) and m[len(STAT_PREFIX):] not in per_head})  # a newer attnexp's
        a = _analysis(z, found, per_head)
        return Snapshot(Path(path), a, np.asarray(z["weights"]) if weights and "weights" in found else None,
                        int(z["epoch"]) if "epoch" in found and z["epoch"].size == 1 else None,
                        int(z["step"]) if "step" in found and z["step"].size == 1 else None)


def analysis_members(a: Analysis) -> dict[str, np.ndarray]:
    """What a snapshot keeps of an Analysis besides its per-head scores: plain arrays only."""
    out: dict[str, np.ndarray] = {}
    if a.roles is not None:
        out["roles"] = np.asarray(a.roles, dtype=str)
    if a.layer_importance is not None:
        out["layer_importance"] = a.layer_importance
    for name in ("rollout", "flow"):
        for b, m in enumerate(getattr(a, name) or []):
            out[f"{name}_ex{b}"] = m.astype(np.float32)
    for b, r in enumerate(a.relevance or []):
        out[f"relevance_pred_ex{b}"] = np.array([r["pred"]])
        out[f"relevance_pred_scores_ex{b}"] = r["pred_scores"].astype(np.float32)
        if r["true"] is not None:
            out[f"relevance_true_ex{b}"] = np.array([r["true"]])
            out[f"relevance_true_scores_ex{b}"] = r["true_scores"].astype(np.float32)
    for name in ("skipped", "notes"):
        if getattr(a, name):
            out[name] = np.array([f"{k}: {v}" for k, v in getattr(a, name).items()], dtype=str)
    return out


def _analysis(z, files: set[str], per_head: dict[str, np.ndarray]) -> Analysis:
    """The Analysis `analysis_members` saved, back: a resumed run's viewer shows its earlier epochs' roles,
    scores, rollout and relevance too."""
    a = Analysis(scores=per_head)
    a.roles = np.asarray(z["roles"], dtype=str) if "roles" in files else None
    a.layer_importance = np.asarray(z["layer_importance"], dtype=float) if "layer_importance" in files else None
    for name in ("rollout", "flow"):
        found = sorted((int(k.rsplit("_ex", 1)[1]), k) for k in files if k.startswith(f"{name}_ex"))
        setattr(a, name, [np.asarray(z[k], dtype=float) for _, k in found] or None)
    preds = sorted(int(k.rsplit("_ex", 1)[1]) for k in files if k.startswith("relevance_pred_ex"))
    a.relevance = [{"pred": int(z[f"relevance_pred_ex{b}"][0]), "pred_scores": np.asarray(z[f"relevance_pred_scores_ex{b}"]),
                    "true": int(z[f"relevance_true_ex{b}"][0]) if f"relevance_true_ex{b}" in files else None,
                    "true_scores": np.asarray(z[f"relevance_true_scores_ex{b}"]) if f"relevance_true_ex{b}" in files
                    else None} for b in preds] or None
    for name in ("skipped", "notes"):
        if name in files:
            setattr(a, name, dict(str(x).split(": ", 1) for x in z[name] if ": " in str(x)))
    return a


def latest(maps_dir: Path | str | None, say=None) -> Path | None:
    """The run's newest readable snapshot; each file that is not one is left out with one line
    through `say` (the report prints it), and the one before it is used."""
    for path in reversed(files(maps_dir) if maps_dir else []):
        try:
            check_sizes(path)
            return path
        except SnapshotError as e:
            if say:
                say(f"left out {path}: {e}")
    return None


def head_pictures(a: Analysis, title: str) -> dict[str, tuple]:
    """The analysis's pictures of the heads, name -> (image, PNG bytes): `roles` (heads.roles) and
    `importance` (heads.importance), each a layers x heads table."""
    from attnexp.maps import render

    images = {}
    if a.roles is not None:
        images["roles"] = render.roles(a.roles, a.scores, title)
    if "importance" in a.scores:
        images["importance"] = render.importance(a.scores["importance"], a.layer_importance, title)
    return {name: (img, render.to_png(img)) for name, img in images.items()}


def save(out_dir: Path, stem: str, w: np.ndarray, probe: Probe, reading: Analysis, title: str,
         view: MapsConfig, **meta) -> tuple[list, dict[str, tuple]]:
    """One snapshot of the probe set's maps, the same for the callback (epochNNN) and `attnexp maps`:
    its numbers (`write`) and its pictures (`draw`). The training callback calls the two apart: the
    numbers on the training thread, the pictures on its drawing thread (maps.background)."""
    write(out_dir, stem, w, probe, reading, view, **meta)
    return draw(out_dir, stem, w, probe, reading, title, view)


def write(out_dir: Path, stem: str, w: np.ndarray, probe: Probe, reading: Analysis, view: MapsConfig, **meta) -> Path:
    """<stem>.npz: weights (L, B, H, T, T) as view.dtype, float16 by default, tokens (B, T) and
    lengths (B,), each per-head quantity (the reading's `scores`: heads.analysis.read_heads) as its
    member, roles (L, H), rollout_exK / flow_exK (n, n), relevance_*_exK and `meta`."""
    a = reading
    members = {quantities.member(k): v for k, v in a.scores.items()}
    T = max(probe.lengths)  # tokens as a (B, T) string array padded with "": no pickled objects, np.load reads it safely
    path = Path(out_dir) / f"{stem}.npz"
    with whole(path) as tmp, open(tmp, "wb") as f:  # a file object: savez would add .npz to the temporary name
        np.savez_compressed(f, weights=w.astype(np.dtype(view.dtype)), lengths=np.array(probe.lengths),
                            tokens=np.array([list(t) + [""] * (T - len(t)) for t in probe.tokens], dtype=str),
                            **members, **analysis_members(a), **meta)
    return path


def draw(out_dir: Path, stem: str, w: np.ndarray, probe: Probe, reading: Analysis, title: str,
         view: MapsConfig) -> tuple[list, dict[str, tuple]]:
    """The snapshot's pictures: <stem>_roles.png and <stem>_importance.png (`head_pictures`), and a
    PNG grid per example, <stem>_exK.png, its heads titled with their roles (or their alignment
    score) and a last row of rollout (and flow). Returns (grid, PNG bytes) per example (the
    paletted grid doubles as a GIF frame, the bytes go to the loggers as they are) and the head
    pictures."""
    from attnexp.maps import render

    a = reading
    pictures = head_pictures(a, title)
    for name, (_, png) in pictures.items():
        render.write_bytes(out_dir / f"{stem}_{name}.png", png)  # whole or not at all, as every picture
    grids = []
    scores = a.scores.get("alignment")
    note = " · (alignment score)" if scores is not None else ""
    for b, toks in enumerate(probe.tokens):
        panels = [("rollout (every layer)", a.rollout[b] if a.rollout else None),
                  ("flow (every layer)", a.flow[b] if a.flow else None)]
        img = render.to_palette(render.grid(w[:, b], toks, f"{title} · example {b}{note}", view.max_tokens,
                                            head_scores=scores, scale=view.scale, long=view.long,
                                            head_labels=a.roles, extra=panels))
        png = render.to_png(img)
        render.write_bytes(example_png(out_dir, stem, b), png)
        grids.append((img, png))
    return grids, pictures
