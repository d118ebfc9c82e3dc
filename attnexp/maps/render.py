"""Layers x heads grids of attention maps with token labels, drawn straight from numpy with PIL.

Not matplotlib figures: a figure costs ~0.9 s to lay out and encode, which at 4 examples a
epoch made map logging cost more than the default run's training. This draws a grid in ~20 ms.
The colour scale and the treatment of long sequences are maps.view's; the legend is on the
picture. Grids are turned into one fixed palette (`to_palette`), which makes the PNGs ~3x faster
to write and doubles as the GIF frames."""

from __future__ import annotations

import io
import logging
from functools import cache, lru_cache

import numpy as np
from PIL import GifImagePlugin, Image, ImageDraw, ImageFont

from attnexp.config.files import FileRefused
from attnexp.config.paths import whole
from attnexp.maps.view import LUT, SCALES, colours, fit, is_signed, rows_note, scaled

MAX_LABELS = 48  # beyond this many tokens, label every k-th so the labels stay readable
BG, INK, GREY = (255, 255, 255), (30, 30, 30), (90, 90, 90)


@cache
def _font(size: int):
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1 has only the fixed bitmap font
        return ImageFont.load_default()


def heat(v_TT: np.ndarray, px: int, signed: bool) -> Image.Image:
    return Image.fromarray(colours(v_TT, signed)).resize((v_TT.shape[1] * px, v_TT.shape[0] * px), Image.NEAREST)


def grid(w_LHTT: np.ndarray, tokens: list[str], title: str, max_tokens: int = 64, head_scores=None,
         scale: str = "row", long: str = "blocks", head_labels=None, extra: list | None = None) -> Image.Image:
    """One example: a row per layer, a column per head; queries down, keys across. head_labels:
    (L, H) words after each head's name (its role); extra: (title, (n, n) map) panels drawn in a
    last row, on the same colour scale (attention rollout and flow through every layer)."""
    L, H = w_LHTT.shape[:2]
    n = len(tokens)
    extra = [(t, m) for t, m in (extra or []) if m is not None]
    w, labels, note = fit(w_LHTT, tokens, max_tokens, long)
    signed = is_signed(w)
    legend = (f"colour: {SCALES[scale]}" + (" (signed: blue < 0 < red)" if signed else "")
              + f"; {rows_note(w_LHTT[..., :n, :n])}" + (f"; {note}" if note else ""))
    if head_scores is None and not signed:  # a head's mean row entropy tells a uniform head from a sharp one
        from attnexp.heads.stats import row_entropy, shares

        entropy = row_entropy(shares(w_LHTT[..., :n, :n])).mean(-1)  # (L, H), nats, of rows as shares whatever they sum to
        legend += f"; ent: mean row entropy in nats (uniform over {n} tokens: {np.log(n):.1f})"
    rows = L + (1 if extra else 0)
    base, lay = _canvas(tuple(t[:12] for t in labels), rows, max(H, len(extra)), legend, signed)
    img = base.copy()  # token labels are the slow part and never change: drawn once per probe example
    d = ImageDraw.Draw(img)
    d.text((8, 6), f"{title}{lay['sub']}", fill=INK, font=_font(12))
    img.info["maps"] = []  # (layer, head, x, y, side) of every map, for tests and tools
    for layer in range(L):
        v = scaled(w[layer], scale, signed)
        for head in range(H):
            x0, y0 = lay["origin"](layer, head)
            img.info["maps"].append((layer, head, x0, y0, len(labels) * lay["px"]))
            name = f"L{layer} H{head}" + (f" {head_labels[layer][head]}" if head_labels is not None else "") + (
                f"  {head_scores[layer, head]:.2f}" if head_scores is not None else
                "" if signed else f"  ent {entropy[layer, head]:.1f}")
            d.text((x0, y0 - 15), name, fill=INK, font=lay["small"])
            img.paste(heat(v[head], lay["px"], signed), (x0, y0))
    for i, (name, m) in enumerate(extra):
        x0, y0 = lay["origin"](L, i)
        d.text((x0, y0 - 15), name, fill=INK, font=lay["small"])
        img.paste(heat(scaled(fit(m, tokens, max_tokens, long)[0][None], scale, False)[0], lay["px"], False), (x0, y0))
    return img


@lru_cache(maxsize=64)
def _canvas(labels: tuple[str, ...], L: int, H: int, legend: str, signed: bool):
    n = len(labels)
    px = max(3, min(16, 320 // n))
    side, step = n * px, max(1, -(-n // MAX_LABELS))
    small = _font(max(8, min(11, px + 2)))
    margin = max(int(small.getlength(t)) for t in labels) + 8
    gap, top = 10, 46

    def origin(layer, head):
        return margin + head * (side + gap), top + layer * (side + 18 + gap) + 16

    text = f"rows: queries, columns: keys; {legend}"
    width = max(margin + H * (side + gap), int(small.getlength(text)) + 150)
    img = Image.new("RGB", (width, top + L * (side + 18 + gap) + margin), BG)
    d = ImageDraw.Draw(img)
    bar = LUT[signed][np.linspace(0, 255, 100).astype(int)][None].repeat(9, 0)  # the legend's colour bar
    low = "-1" if signed else "0"
    x = 8 + int(small.getlength(low)) + 4
    d.text((8, 23), low, fill=GREY, font=small)
    img.paste(Image.fromarray(bar), (x, 25))
    d.text((x + 104, 23), f"1    {text}", fill=GREY, font=small)
    for layer in range(L):
        for head in range(H):
            x0, y0 = origin(layer, head)
            if head == 0:  # query labels on the left
                for i in range(0, n, step):
                    d.text((margin - 4, y0 + i * px + px / 2), labels[i], fill=INK, font=small, anchor="rm")
            if layer == L - 1:  # key labels below, rotated
                for i in range(0, n, step):
                    _vertical(img, labels[i], x0 + i * px + px // 2, y0 + side + 4, small)
    sub = f"; one label in {step} shown" if step > 1 else ""
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


@cache
def _palette() -> Image.Image:
    """One fixed palette for every frame: 112 viridis and 112 blue-white-red steps, and 32 greys
    (text, background). Quantizing each frame adaptively cost ~0.2 s per GIF; this costs ~0.03 s."""
    steps = np.linspace(0, 255, 112).astype(int)
    greys = np.repeat(np.linspace(0, 255, 32).astype(np.uint8)[:, None], 3, axis=1)
    pal = Image.new("P", (1, 1))
    pal.putpalette(np.concatenate([LUT[False][steps], LUT[True][steps], greys]).flatten().tolist())
    return pal


def to_palette(img: Image.Image) -> Image.Image:
    """The grid in the fixed palette: 1 byte a pixel, for the PNG and as a GIF frame."""
    return img.quantize(palette=_palette(), dither=Image.Dither.NONE)


class Animation:
    """A looping GIF built a frame at a time: each frame is encoded when it is added (the training
    callback adds it on its drawing thread right after the snapshot), so writing the file at the end
    is a copy of bytes. Pillow's `save(save_all=True, append_images=...)` encodes every frame at the
    end (~0.1 s a GIF of 9 frames, which the end of every run waited for); the encoding here is still
    Pillow's, through its GIF plugin's frame-by-frame functions (GifImagePlugin.getheader/getdata).
    Every frame is in the fixed palette (`to_palette`), so the first frame's is the GIF's."""

    def __init__(self, ms_per_frame: int = 700):
        self.ms, self.size = ms_per_frame, None
        self.header: bytes | None = None
        self.frames: list[bytes] = []

    def add(self, frame: Image.Image) -> None:
        if self.size is None:
            self.size = frame.size
        elif frame.size != self.size:
            frame = frame.resize(self.size)
        # a copy: an image Pillow has saved as PNG keeps that encoder's settings, which its GIF encoder then takes
        frame = frame.copy() if frame.mode == "P" else to_palette(frame.convert("RGB"))
        if self.header is None:
            self.header = b"".join(GifImagePlugin.getheader(frame.copy(), info={"loop": 0, "duration": self.ms})[0])
        self.frames.append(b"".join(GifImagePlugin.getdata(frame, duration=self.ms)))

    def write(self, path) -> None:
        """The GIF, whole or not at all (a full disk left a 0-byte GIF behind)."""
        if self.header is not None:
            write_bytes(path, self.header + b"".join(self.frames) + b";")


def write_png(img: Image.Image, path) -> None:
    """A picture written whole or not at all (a full disk left a 0-byte timeline.png behind)."""
    write_bytes(path, to_png(img))


def write_bytes(path, data: bytes) -> None:
    """`data` as the file `path`, whole or not at all (config.paths.whole); a link, folder or pipe planted
    at `path` is left as it is, and said in one line (the writing rule, config.files)."""
    try:
        with whole(path) as tmp:
            tmp.write_bytes(data)
    except FileRefused as e:
        logging.getLogger("attnexp").warning("%s is %s; not written", path, e)


def importance(imp_LH: np.ndarray, layer_L: np.ndarray | None, title: str) -> Image.Image:
    """Head importance as a layers x heads table of coloured cells (viridis over 0 .. the largest
    loss change; a head whose silencing lowers the loss is drawn at 0), the loss change written in
    each, and each layer's (every head silenced) at the end of its row."""
    L, H = imp_LH.shape
    font, small = _font(12), _font(11)
    cell, left, top = 58, 40, 52
    right = 96 if layer_L is not None else 8
    img = Image.new("RGB", (max(left + H * cell + right, 430), top + L * cell + 30), BG)
    d = ImageDraw.Draw(img)
    d.text((8, 6), f"head importance · {title}", fill=INK, font=font)
    d.text((8, 24), "validation loss increase with the head silenced (its output zeroed)", fill=GREY, font=small)
    top_value = max(float(imp_LH.max()), 1e-12)
    for layer in range(L):
        d.text((8, top + layer * cell + cell / 2), f"L{layer}", fill=INK, font=small, anchor="lm")
        for head in range(H):
            v = float(imp_LH[layer, head])
            rgb = tuple(int(c) for c in colours(np.array([max(v, 0.0) / top_value]), False)[0])
            x0, y0 = left + head * cell, top + layer * cell
            d.rectangle([x0, y0, x0 + cell - 2, y0 + cell - 2], fill=rgb)
            ink = INK if sum(rgb) > 380 else BG
            d.text((x0 + cell / 2, y0 + cell / 2), f"{v:+.3f}", fill=ink, font=small, anchor="mm")
        if layer_L is not None:
            d.text((left + H * cell + 8, top + layer * cell + cell / 2), f"layer {float(layer_L[layer]):+.3f}",
                   fill=INK, font=small, anchor="lm")
    for head in range(H):
        d.text((left + head * cell + cell / 2, top + L * cell + 10), f"H{head}", fill=INK, font=small, anchor="mm")
    return img


ROLE_COLOURS = {"induction": (214, 39, 40), "previous": (31, 119, 180), "next": (174, 199, 232), "self": (148, 103, 189),
                "first": (255, 127, 14), "separator": (44, 160, 44), "punctuation": (152, 223, 138),
                "local": (23, 190, 207), "broad": (199, 199, 199), "mixed": (245, 245, 245)}


def roles(roles_LH: np.ndarray, scores: dict[str, np.ndarray], title: str) -> Image.Image:
    """Each head's role as a layers x heads table: a colour per role, the role's name and the score
    that decided it (heads.roles.THRESHOLDS) in each cell; `mixed` heads show their largest pattern."""
    from attnexp.heads.roles import SCORES, THRESHOLDS

    L, H = roles_LH.shape
    font, small = _font(12), _font(10)
    cell, left, top = 66, 30, 52
    img = Image.new("RGB", (max(left + H * cell + 8, 430), top + L * cell + 30), BG)
    d = ImageDraw.Draw(img)
    d.text((8, 6), f"head roles · {title}", fill=INK, font=font)
    d.text((8, 24), "each head's pattern and the share of its rows' mass behind it (mixed: none reaches its threshold)",
           fill=GREY, font=small)
    for layer in range(L):
        d.text((8, top + layer * cell + cell / 2), f"L{layer}", fill=INK, font=small, anchor="lm")
        for head in range(H):
            role = str(roles_LH[layer, head])
            key = THRESHOLDS[role][0] if role in THRESHOLDS else max(
                (k for k in SCORES if k in scores and k != "broadness"), key=lambda k: scores[k][layer, head], default=None)
            rgb = ROLE_COLOURS.get(role, ROLE_COLOURS["mixed"])
            x0, y0 = left + head * cell, top + layer * cell
            d.rectangle([x0, y0, x0 + cell - 2, y0 + cell - 2], fill=rgb)
            ink = INK if sum(rgb) > 380 else BG
            d.text((x0 + cell / 2, y0 + cell / 2 - 8), role[:11], fill=ink, font=small, anchor="mm")
            if key is not None:
                label = key.replace("_token", "").replace("broadness", "broad")[:8]
                d.text((x0 + cell / 2, y0 + cell / 2 + 8), f"{label} {float(scores[key][layer, head]):.2f}", fill=ink,
                       font=small, anchor="mm")
    for head in range(H):
        d.text((left + head * cell + cell / 2, top + L * cell + 10), f"H{head}", fill=INK, font=small, anchor="mm")
    return img


TIMELINE_SHOWN = ("prev_token", "induction", "to_first")  # the role scores a timeline picture shows, where present
MIN_CURVE_SPAN = 1.0  # nats: the least vertical range of the loss and in-context panels


def _row_labels(d, layers: int, heads: int, left: int, y: int, row: int) -> None:
    """A label a head (L1 H0) where rows have room, else a label a layer."""
    for layer in range(layers):
        if row >= 10:
            for head in range(heads):
                d.text((left - 4, y + (layer * heads + head + 0.5) * row), f"L{layer} H{head}", fill=INK, font=_font(9),
                       anchor="rm")
        else:
            d.text((left - 4, y + layer * heads * row + heads * row / 2), f"L{layer}", fill=INK, font=_font(10), anchor="rm")


def _curve(d, x: np.ndarray, name: str, changes: list, steps: np.ndarray, box: tuple, small) -> None:
    """One run-level curve of the timeline picture over the readings' columns (NaN: no point there),
    a dashed red line at each of its `changes`."""
    left, y, col, curve_h = box
    N = len(steps)
    d.rectangle([left, y, left + N * col, y + curve_h], outline=(220, 220, 220))
    ok = np.isfinite(x)
    if ok.sum() >= 2:
        lo, hi = float(np.nanmin(x)), float(np.nanmax(x))
        if hi - lo < MIN_CURVE_SPAN and name != "llc":  # a flat curve (nats) drawn flat: a wiggle is no fall
            lo, hi = (lo + hi - MIN_CURVE_SPAN) / 2, (lo + hi + MIN_CURVE_SPAN) / 2
        span = hi - lo
        pts = [(left + (k + 0.5) * col, y + curve_h - 4 - (x[k] - lo) / span * (curve_h - 8)) for k in np.flatnonzero(ok)]
        d.line(pts, fill=(31, 119, 180), width=2)
        d.text((left - 4, y + 4), f"{hi:.2f}", fill=GREY, font=small, anchor="rt")
        d.text((left - 4, y + curve_h - 4), f"{lo:.2f}", fill=GREY, font=small, anchor="rb")
    for c in changes:
        if c.step in steps:
            xk = left + int(np.searchsorted(steps, c.step)) * col
            for yy in range(y, y + curve_h, 6):
                d.line([(xk, yy), (xk, yy + 3)], fill=(214, 39, 40), width=1)


def timeline(t, formations: list, changes: list, title: str) -> Image.Image:
    """The heads over training (heads.timeline): for each role score, a strip with a row per head
    (L0H0 .. down) and a column per reading (readings are log-spaced by default, so columns are
    nearly log(step)), viridis 0 .. 1; a red outline where a head became that role; under them the
    training loss and the in-context score on the same columns (and the LLC where maps.llc estimated
    it), a dashed line at each of their change points. Step numbers under the last panel."""
    names = [n for n in TIMELINE_SHOWN if t.curve(n) is not None]
    steps = t.steps
    N, LH = len(steps), t.layers * t.heads
    font, small = _font(12), _font(10)
    left, right, top, col = 56, 16, 40, max(4, min(16, 900 // max(N, 1)))
    row = max(3, min(12, 160 // max(LH, 1)))
    width = left + N * col + right
    curve_h = 70
    curves = [("loss", "training loss"), ("icl", "in-context score (late - early loss)")]
    if np.isfinite(t.scalar("icl_plain")).any() and not np.allclose(t.scalar("icl_plain"), t.scalar("icl"), equal_nan=True):
        curves.append(("icl_plain", "in-context score on plain windows (nothing planted)"))
    if np.isfinite(t.scalar("llc")).any():  # maps.llc: the LLC where it was estimated, its critical points dashed
        curves.append(("llc", "local learning coefficient (SGLD, devinterp)"))
    height = top + len(names) * (LH * row + 22) + len(curves) * (curve_h + 22) + 34
    img = Image.new("RGB", (max(width, 480), height), BG)
    d = ImageDraw.Draw(img)
    d.text((8, 6), f"heads over training · {title}", fill=INK, font=font)
    d.text((8, 22), f"{N} readings, steps {int(steps[0]) if N else 0}..{int(steps[-1]) if N else 0}; red: the reading a "
           "head became its role", fill=GREY, font=small)
    y = top
    for name in names:
        v = np.clip(t.curve(name).reshape(N, LH).T, 0, 1)  # (LH, N)
        d.text((8, y + 2), name.replace("_", " "), fill=INK, font=small)
        y += 14
        img.paste(Image.fromarray(colours(v, False)).resize((N * col, LH * row), Image.NEAREST), (left, y))
        _row_labels(d, t.layers, t.heads, left, y, row)
        for f in formations:
            if f.quantity == name and f.step in steps:
                k = int(np.searchsorted(steps, f.step))
                r = f.layer * t.heads + f.head
                d.rectangle([left + k * col, y + r * row, left + (k + 1) * col - 1, y + (r + 1) * row - 1],
                            outline=(214, 39, 40), width=2)
        y += LH * row + 8
    for name, label in curves:
        d.text((8, y), label, fill=INK, font=small)
        y += 14
        _curve(d, t.scalar(name), name, [c for c in changes if c.name == name], steps, (left, y, col, curve_h), small)
        y += curve_h + 8
    every = max(1, N // 8)
    for k in range(0, N, every):
        d.text((left + (k + 0.5) * col, y), str(int(steps[k])), fill=GREY, font=small, anchor="mt")
    d.text((left + N * col, y + 14), "step", fill=GREY, font=small, anchor="rt")
    return img
