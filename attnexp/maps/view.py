"""What a picture of an attention map shows, shared by the PNG grids and the HTML viewer:
the colour scale (a map of diffuse weights around 0.003 is one colour on a fixed 0..1 scale) and,
for sequences longer than the picture holds, blocks of tokens (the whole map, pooled) or the first
tokens only. Signed maps (e.g. differential attention) keep their sign: a diverging scale."""

from __future__ import annotations

import math

import numpy as np

from attnexp.config.training import MAP_SCALES as SCALES


def rows_note(w_TT_rows: np.ndarray) -> str:
    """What the rows of these maps sum to, for the legend: w (..., n, n) over real tokens."""
    if not w_TT_rows.size:
        return ""
    s = w_TT_rows.sum(-1)
    if np.allclose(s, 1, atol=2e-3):
        return "rows sum to 1"
    return f"rows sum to {float(s.min()):.2f}…{float(s.max()):.2f} (not distributions)"


def is_signed(w: np.ndarray) -> bool:
    return bool(np.nanmin(w) < -1e-6) if w.size else False


def scaled(w_HTT: np.ndarray, scale: str, signed: bool) -> np.ndarray:
    """(H, T, T) weights -> values in [0, 1] (or [-1, 1] when signed) for the colour scale."""
    a = np.abs(w_HTT) if signed else np.clip(w_HTT, 0, None)
    sign = np.sign(w_HTT) if signed else 1.0
    if scale == "row":
        v = a / np.maximum(a.max(-1, keepdims=True), 1e-12)
    elif scale == "head":
        v = a / np.maximum(a.max((-2, -1), keepdims=True), 1e-12)
    elif scale == "log":
        v = np.clip((np.log10(np.maximum(a, 1e-12)) + 4) / 4, 0, 1)
    elif scale == "linear":
        v = np.clip(a, 0, 1)
    else:
        raise ValueError(f"Unknown scale {scale!r}; choose one of {', '.join(SCALES)}")
    return v * sign


def fit(w_HTT: np.ndarray, tokens: list[str], max_tokens: int, long: str = "blocks") -> tuple[np.ndarray, list[str], str]:
    """The map at most `max_tokens` on a side, its labels and a note saying what was done. Blocks:
    consecutive tokens pooled into the mean weight of a block's (query, key) pairs, so every block
    is a weight per token pair whatever its size: the last block, often partial, is not darker
    for holding fewer keys. (A block row times the block size is the mass its queries put there.)"""
    n = len(tokens)
    w = w_HTT[..., :n, :n]
    if n <= max_tokens:
        return w, list(tokens), ""
    if long == "first":
        return w[..., :max_tokens, :max_tokens], list(tokens[:max_tokens]), f"first {max_tokens} of {n} tokens"
    b = math.ceil(n / max_tokens)
    m = math.ceil(n / b)
    pad = m * b - n
    wp = np.pad(w, [(0, 0)] * (w.ndim - 2) + [(0, pad), (0, pad)])
    real = (np.arange(m * b) < n).reshape(m, b).sum(1)  # real tokens per block
    pooled = wp.reshape(*w.shape[:-2], m, b, m, b).sum((-3, -1)) / (real[:, None] * real[None, :])
    labels = [f"{tokens[i * b]}…" for i in range(m)]
    return pooled, labels, f"{n} tokens in {m} blocks of {b} (mean weight per token)"


# matplotlib's viridis at 17 evenly spaced points and RdBu_r at 11: interpolated to 256 they are
# within 5/255 of the full tables, and the training process never imports matplotlib for them.
VIRIDIS_17 = [[68, 1, 84], [72, 24, 106], [71, 45, 123], [66, 64, 134], [59, 82, 139], [51, 99, 141], [44, 114, 142],
              [38, 130, 142], [33, 145, 140], [31, 160, 136], [40, 174, 128], [63, 188, 115], [94, 201, 98],
              [132, 212, 75], [173, 220, 48], [216, 226, 25], [253, 231, 37]]
RDBU_11 = [[5, 48, 97], [33, 102, 172], [67, 147, 195], [146, 197, 222], [209, 229, 240], [247, 247, 247],
           [253, 219, 199], [244, 165, 130], [214, 96, 77], [178, 24, 43], [103, 0, 31]]


def _lut(anchors) -> np.ndarray:
    a = np.array(anchors, dtype=float)
    x, xp = np.linspace(0, 1, 256), np.linspace(0, 1, len(a))
    return np.stack([np.interp(x, xp, a[:, c]) for c in range(3)], 1).round().astype(np.uint8)


LUT = {False: _lut(VIRIDIS_17), True: _lut(RDBU_11)}


def colours(v: np.ndarray, signed: bool) -> np.ndarray:
    """Values in [0, 1] (viridis) or [-1, 1] (blue - white - red) -> uint8 RGB."""
    x = (v + 1) / 2 if signed else v
    return LUT[signed][np.clip(np.rint(np.nan_to_num(x) * 255), 0, 255).astype(np.uint8)]
