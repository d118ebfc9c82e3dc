"""Layers x heads grids of attention maps with token labels, drawn straight from numpy with PIL.

Not matplotlib figures: a figure costs ~0.9 s to lay out and encode, which at 4 examples a
epoch made map logging cost more than the default run's training. This draws a grid in ~20 ms.
Colours: viridis (0 = dark purple, 1 = yellow). Grids are quantized to one fixed palette
(`quantize`), which makes the PNGs ~3x faster to write and doubles as the GIF frames."""

from __future__ import annotations

import io
from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw, ImageFont

MAX_LABELS = 48  # beyond this many tokens, label every k-th so the labels stay readable
BG, INK = (255, 255, 255), (30, 30, 30)


# matplotlib's viridis at 17 evenly spaced points; interpolated to 256 it is within 5/255 of the
# full table, and the training process never imports matplotlib for it (~0.15 s).
VIRIDIS_17 = [[68, 1, 84], [72, 24, 106], [71, 45, 123], [66, 64, 134], [59, 82, 139], [51, 99, 141], [44, 114, 142],
              [38, 130, 142], [33, 145, 140], [31, 160, 136], [40, 174, 128], [63, 188, 115], [94, 201, 98],
              [132, 212, 75], [173, 220, 48], [216, 226, 25], [253, 231, 37]]


@lru_cache(maxsize=None)
def _lut() -> np.ndarray:
    anchors = np.array(VIRIDIS_17, dtype=float)
    x, xp = np.linspace(0, 1, 256), np.linspace(0, 1, len(anchors))
    return np.stack([np.interp(x, xp, anchors[:, c]) for c in range(3)], 1).round().astype(np.uint8)


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
    base, lay = _canvas(tuple(t[:12] for t in tokens[:n]), L, H, f"{note}")
    img = base.copy()  # token labels are the slow part and never change: drawn once per probe example
    d = ImageDraw.Draw(img)
    d.text((8, 6), f"{title}{note}{lay['sub']}", fill=INK, font=_font(12))
    for layer in range(L):
        for head in range(H):
            x0, y0 = lay["origin"](layer, head)
            name = f"L{layer} H{head}" + (f"  {head_scores[layer, head]:.2f}" if head_scores is not None else "")
            d.text((x0, y0 - 15), name, fill=INK, font=lay["small"])
            img.paste(heat(w_LHTT[layer, head, :n, :n], lay["px"]), (x0, y0))
    return img


@lru_cache(maxsize=64)
def _canvas(labels: tuple[str, ...], L: int, H: int, note: str):
    n = len(labels)
    px = max(3, min(16, 320 // n))
    side, step = n * px, max(1, -(-n // MAX_LABELS))
    small = _font(max(8, min(11, px + 2)))
    margin = max(int(small.getlength(t)) for t in labels) + 8
    gap, top = 10, 40

    def origin(layer, head):
        return margin + head * (side + gap), top + layer * (side + 18 + gap) + 16

    img = Image.new("RGB", (margin + H * (side + gap), top + L * (side + 18 + gap) + margin), BG)
    d = ImageDraw.Draw(img)
    d.text((8, 22), "rows: queries, columns: keys; colour: weight 0 (purple) .. 1 (yellow)", fill=(90, 90, 90), font=small)
    for layer in range(L):
        for head in range(H):
            x0, y0 = origin(layer, head)
            if head == 0:  # query labels on the left
                for i in range(0, n, step):
                    d.text((margin - 4, y0 + i * px + px / 2), labels[i], fill=INK, font=small, anchor="rm")
            if layer == L - 1:  # key labels below, rotated
                for i in range(0, n, step):
                    _vertical(img, labels[i], x0 + i * px + px // 2, y0 + side + 4, small)
    sub = f"; every {step}th token labelled" if step > 1 else ""
    return img, {"origin": origin, "px": px, "small": small, "sub": sub}


def _vertical(img: Image.Image, text: str, x: int, y: int, font) -> None:
    w = int(font.getlength(text)) + 2
    h = int(font.size if hasattr(font, "size") else 11) + 4
    tile = Image.new("RGBA", (w, h), (0, 0, 0, 0))
    ImageDraw.Draw(tile).text((0, 0), text, fill=INK + (255,), font=font)
    tile = tile.rotate(90, expand=True)
    img.paste(tile, (x - tile.width // 2, y), tile)


def to_png(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG", compress_level=1)  # speed over size: a grid is written every epoch
    return buf.getvalue()


@lru_cache(maxsize=None)
def _palette() -> Image.Image:
    """One fixed palette for every frame: 224 viridis steps and 32 greys (text, background).
    Quantizing each frame adaptively cost ~0.2 s per GIF; this costs ~0.03 s."""
    lut = _lut()[np.linspace(0, 255, 224).astype(int)]
    greys = np.repeat(np.linspace(0, 255, 32).astype(np.uint8)[:, None], 3, axis=1)
    pal = Image.new("P", (1, 1))
    pal.putpalette(np.concatenate([lut, greys]).flatten().tolist())
    return pal


def quantize(img: Image.Image) -> Image.Image:
    """The grid in the fixed palette: 1 byte a pixel, for the PNG and as a GIF frame."""
    return img.quantize(palette=_palette(), dither=Image.Dither.NONE)


def gif(frames: list[Image.Image], path, ms_per_frame: int = 700) -> None:
    """An animation of the maps' evolution: one quantized grid per epoch, as a looping GIF."""
    size = frames[0].size
    frames = [f if f.size == size else f.resize(size) for f in frames]
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=ms_per_frame, loop=0)
