"""Layers x heads grids of attention maps with token labels, drawn straight from numpy with PIL.

Not matplotlib figures: a figure costs ~0.9 s to lay out and encode, which at 4 examples a
epoch made map logging cost more than the default run's training. This draws a grid in ~20 ms.
Colours: matplotlib's viridis as a lookup table (0 = dark purple, 1 = yellow)."""

from __future__ import annotations

import io
from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw, ImageFont

MAX_LABELS = 48  # beyond this many tokens, label every k-th so the labels stay readable
BG, INK = (255, 255, 255), (30, 30, 30)


@lru_cache(maxsize=None)
def _lut() -> np.ndarray:
    from matplotlib import colormaps

    return (colormaps["viridis"](np.linspace(0, 1, 256))[:, :3] * 255).astype(np.uint8)


@lru_cache(maxsize=None)
def _font(size: int):
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1 has only the fixed bitmap font
        return ImageFont.load_default()


def crop(tokens: list[str], max_tokens: int) -> tuple[int, str]:
    """How many tokens to show, and a note saying what was left out."""
    n = min(len(tokens), max_tokens)
    return n, ("" if n == len(tokens) else f" (first {n} of {len(tokens)} tokens shown)")


def heat(w_TT: np.ndarray, px: int) -> Image.Image:
    rgb = _lut()[np.clip(np.rint(w_TT * 255), 0, 255).astype(np.uint8)]
    return Image.fromarray(rgb).resize((w_TT.shape[1] * px, w_TT.shape[0] * px), Image.NEAREST)


def grid(w_LHTT: np.ndarray, tokens: list[str], title: str, max_tokens: int = 64, head_scores=None) -> Image.Image:
    """One example: a row per layer, a column per head; queries down, keys across."""
    L, H = w_LHTT.shape[:2]
    n, note = crop(tokens, max_tokens)
    px = max(3, min(16, 320 // n))
    side, step = n * px, max(1, -(-n // MAX_LABELS))
    font, small = _font(12), _font(max(8, min(11, px + 2)))
    labels = [t[:12] for t in tokens[:n]]
    margin = max(int(small.getlength(t)) for t in labels) + 8
    gap, top = 10, 40
    W = margin + H * (side + gap)
    Hh = top + L * (side + 18 + gap) + margin
    img = Image.new("RGB", (W, Hh), BG)
    d = ImageDraw.Draw(img)
    sub = f"; every {step}th token labelled" if step > 1 else ""
    d.text((8, 6), f"{title}{note}{sub}", fill=INK, font=font)
    d.text((8, 22), "rows: queries, columns: keys; colour: weight 0 (purple) .. 1 (yellow)", fill=(90, 90, 90), font=small)
    for layer in range(L):
        y0 = top + layer * (side + 18 + gap) + 16
        for head in range(H):
            x0 = margin + head * (side + gap)
            name = f"L{layer} H{head}" + (f"  {head_scores[layer, head]:.2f}" if head_scores is not None else "")
            d.text((x0, y0 - 15), name, fill=INK, font=small)
            img.paste(heat(w_LHTT[layer, head, :n, :n], px), (x0, y0))
            if head == 0:  # query labels on the left
                for i in range(0, n, step):
                    d.text((margin - 4, y0 + i * px + px / 2), labels[i], fill=INK, font=small, anchor="rm")
            if layer == L - 1:  # key labels below, rotated
                for i in range(0, n, step):
                    _vertical(img, labels[i], x0 + i * px + px // 2, y0 + side + 4, small)
    return img


def _vertical(img: Image.Image, text: str, x: int, y: int, font) -> None:
    w = int(font.getlength(text)) + 2
    h = int(font.size if hasattr(font, "size") else 11) + 4
    tile = Image.new("RGBA", (w, h), (0, 0, 0, 0))
    ImageDraw.Draw(tile).text((0, 0), text, fill=INK + (255,), font=font)
    tile = tile.rotate(90, expand=True)
    img.paste(tile, (x - tile.width // 2, y), tile)


def to_png(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=False, compress_level=3)
    return buf.getvalue()


def gif(frames: list[bytes], path, ms_per_frame: int = 700) -> None:
    """An animation of the maps' evolution: one PNG grid per epoch, as a looping GIF."""
    imgs = [Image.open(io.BytesIO(f)).convert("RGB") for f in frames]
    size = imgs[0].size
    imgs = [im if im.size == size else im.resize(size) for im in imgs]
    imgs[0].save(path, save_all=True, append_images=imgs[1:], duration=ms_per_frame, loop=0)
