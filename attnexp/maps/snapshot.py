"""A snapshot of the probe set's maps on disk, the same for the training callback (epochNNN) and
`attnexp maps`: written by `save`, read back by `latest` (the report, a resumed run). The layout
(file names, array names) lives here alone."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from attnexp.config import MapsConfig

if TYPE_CHECKING:
    from attnexp.maps.analysis import Analysis
    from attnexp.maps.probe import Probe

STAT_PREFIX = "stat_"
START = -1  # the snapshot taken before training, kept in the viewer's epochs as -1 and shown as "start"


def stem(epoch: int) -> str:
    """A training snapshot's file stem: start or epochNNN(.npz, _exK.png)."""
    return "start" if epoch == START else f"epoch{epoch:03d}"


def files(maps_dir: Path | str) -> list[Path]:
    """A run's snapshots, oldest first (epochNNN.npz)."""
    d = Path(maps_dir)
    return sorted(d.glob("epoch*.npz")) if d.is_dir() else []


def head_stats(path: Path | str) -> dict[str, np.ndarray]:
    """The per-head statistics (name -> (L, H)) and alignment scores of one snapshot. np.load
    without pickle: a stranger's file stays plain arrays."""
    with np.load(path, allow_pickle=False) as z:
        out = {k[len(STAT_PREFIX):]: np.asarray(z[k], dtype=float) for k in z.files if k.startswith(STAT_PREFIX)}
        if "alignment" in z.files:
            out["alignment"] = np.asarray(z["alignment"], dtype=float)
    return out


def latest_head_stats(maps_dir: Path | str) -> dict[str, np.ndarray]:
    """The last snapshot's statistics, or {} when the run kept no maps."""
    found = files(maps_dir)
    return head_stats(found[-1]) if found else {}


def roles(path: Path | str) -> np.ndarray | None:
    """The (L, H) role names a snapshot saved (maps.roles), or None."""
    with np.load(path, allow_pickle=False) as z:
        return np.asarray(z["roles"], dtype=str) if "roles" in z.files else None


def head_pictures(a: Analysis, title: str) -> dict[str, tuple]:
    """The analysis's pictures of the heads, name -> (image, PNG bytes): `roles` (maps.roles) and
    `importance` (maps.importance), each a layers x heads table."""
    from attnexp.maps import render

    images = {}
    if a.roles is not None:
        images["roles"] = render.roles(a.roles, a.scores, title)
    if "importance" in a.scores:
        images["importance"] = render.importance(a.scores["importance"], a.layer_importance, title)
    return {name: (img, render.to_png(img)) for name, img in images.items()}


def save(out_dir: Path, stem: str, w: np.ndarray, probe: Probe, head_stats: dict, title: str,
         view: MapsConfig, scores: np.ndarray | None = None, analysis: Analysis | None = None,
         **meta) -> tuple[list, dict[str, tuple]]:
    """One snapshot of the probe set's maps, the same for the callback (epochNNN) and `attnexp maps`:
    <stem>.npz (fp16 weights (L, B, H, T, T), tokens (B, T) and lengths (B,), stat_<name> (L, H):
    the statistics and the analysis's scores, roles (L, H), rollout_exK / flow_exK (n, n),
    relevance_*_exK, alignment and `meta`), <stem>_roles.png and <stem>_importance.png
    (`head_pictures`), and a PNG grid per example, <stem>_exK.png, its heads titled with their roles
    and a last row of rollout (and flow). Returns (grid, PNG bytes) per example (the paletted grid
    doubles as a GIF frame, the bytes go to the loggers as they are) and the head pictures."""
    from attnexp.maps import render

    a = analysis
    per_head = {**head_stats, **(a.scores if a else {})}
    extra = {**meta, **({"alignment": scores} if scores is not None else {}), **(a.arrays() if a else {})}
    T = max(probe.lengths)  # tokens as a (B, T) string array padded with "": no pickled objects, np.load reads it safely
    np.savez_compressed(out_dir / f"{stem}.npz", weights=w.astype(np.float16), lengths=np.array(probe.lengths),
                        tokens=np.array([list(t) + [""] * (T - len(t)) for t in probe.tokens], dtype=str),
                        **{f"{STAT_PREFIX}{k}": v for k, v in per_head.items()}, **extra)
    pictures = head_pictures(a, title) if a is not None else {}
    for name, (_, png) in pictures.items():
        (out_dir / f"{stem}_{name}.png").write_bytes(png)
    grids = []
    note = " · (alignment score)" if scores is not None else ""
    for b, toks in enumerate(probe.tokens):
        panels = [("rollout (every layer)", a.rollout[b] if a.rollout else None),
                  ("flow (every layer)", a.flow[b] if a.flow else None)] if a else []
        img = render.to_palette(render.grid(w[:, b], toks, f"{title} · example {b}{note}", view.max_tokens,
                                            head_scores=scores, scale=view.scale, long=view.long,
                                            head_labels=None if a is None else a.roles, extra=panels))
        png = render.to_png(img)
        (out_dir / f"{stem}_ex{b}.png").write_bytes(png)
        grids.append((img, png))
    return grids, pictures
