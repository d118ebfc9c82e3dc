"""A self-contained HTML viewer (no network, no external script): pick the epoch, the layer, the
head (or every head of a layer at once) and the example; the colour scale and its legend; hover
for the tokens and the weight. A text view shows the whole sequence, however long: hovering a
token highlights the keys it attends to most (the top `K` at full resolution). Heat maps longer
than `viewer_tokens` are pooled into blocks, as in the PNG grids, and say so.

The weights travel log-quantized (1 byte: 0, or 1e-6..1 in 254 steps of 2.4%; signed maps
linearly around a per-map scale) and deflate-compressed in base64; the page inflates them with
the browser's DecompressionStream."""

from __future__ import annotations

import base64
import html
import json
import re
import zlib
from pathlib import Path

import numpy as np

from attnexp.heads import quantities
from attnexp.heads.record import Analysis
from attnexp.maps.render import write_bytes
from attnexp.maps.view import SCALES, fit, is_signed, rows_note

TEMPLATE = Path(__file__).with_name("viewer.html")
K = 8  # keys kept per query row for the text view


NO_KEY = 0xFFFF  # a top-K slot with no key the query can see (masked, or weight exactly 0): the text view skips it


def script_json(obj) -> str:
    """JSON that is safe inside a <script> element: <, > and & as \\u escapes (json.dumps already
    escapes every non-ASCII character, the line separators included), so no value can close the
    element, open an HTML comment or a nested script, whatever it holds."""
    return json.dumps(obj).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def fill(template: str, values: dict[str, str]) -> str:
    """Every placeholder replaced in one pass: a value is never searched for another placeholder
    (a title holding `__DATA__` stays that text). The values come escaped for where they land."""
    return re.sub("|".join(map(re.escape, values)), lambda m: values[m.group(0)], template)


def weight_bytes(w: np.ndarray, signed: bool, scale: float = 1.0) -> np.ndarray:
    """Weights as one byte each (the viewer's `decode` reverses it): log steps, or linear when signed."""
    if signed:
        return np.clip(np.rint(127.5 + 127.5 * w / max(scale, 1e-12)), 0, 255).astype(np.uint8)
    q = 1 + np.rint(254 * (np.log10(np.maximum(w, 1e-12)) + 6) / 6)
    return np.where(w > 1e-6, np.clip(q, 1, 255), 0).astype(np.uint8)


def pack(a: np.ndarray) -> str:
    return base64.b64encode(zlib.compress(np.ascontiguousarray(a).tobytes(), 6)).decode()


class Viewer:
    """The viewer's data, built one snapshot at a time (only the compact form is kept: the heat maps
    at most `viewer_tokens` a side and the top-K keys of every query), written at the end."""

    def __init__(self, tokens: list[list[str]], viewer_tokens: int, long: str = "blocks", signed: bool = False,
                 class_names: list[str] | None = None):
        self.tokens, self.viewer_tokens, self.long, self.signed = tokens, viewer_tokens, long, signed
        self.class_names = class_names
        self.analysis: list[dict | None] = []  # per snapshot: roles, scores, rollout / flow, relevance, what was skipped
        self.epochs: list[int] = []
        self.heat: list[str] = []
        self.top_i: list[str] = []
        self.top_w: list[str] = []
        self.spans: list[list[float]] = []
        self.rows = ""  # what a row sums to, from the first snapshot
        self.examples = []
        for toks in tokens:
            labels, note = fit(np.zeros((len(toks), len(toks))), toks, viewer_tokens, long)[1:]
            self.examples.append({"tokens": toks, "labels": labels, "note": note, "m": len(labels)})

    def add(self, epoch: int, w: np.ndarray, reading: Analysis | None = None) -> None:
        """w: (L, B, H, T, T) weights of one snapshot; reading: its heads (heads.analysis.read_heads)."""
        self.analysis.append(None if reading is None else self._analysis(reading))
        hs, ti, tw, sc = [], [], [], []
        for b, toks in enumerate(self.tokens):
            n = len(toks)
            full = w[:, b, :, :n, :n].astype(np.float32)
            if not self.rows and b == 0:
                self.rows = rows_note(full)
            pooled = fit(full, toks, self.viewer_tokens, self.long)[0]  # (L, H, m, m)
            k = min(K, n)
            idx = np.argsort(-np.abs(full), axis=-1)[..., :k]  # (L, H, n, k)
            top = np.take_along_axis(full, idx, -1)
            idx = np.where(top == 0, NO_KEY, idx)  # masked keys weigh exactly 0: not listed as "attended"
            m = float(np.abs(full).max()) if self.signed else 1.0
            sc.append(m)
            hs.append(weight_bytes(pooled, self.signed, m).ravel())
            ti.append(np.pad(idx, [(0, 0)] * 3 + [(0, K - k)]).astype(np.uint16).ravel())
            tw.append(np.pad(weight_bytes(top, self.signed, m), [(0, 0)] * 3 + [(0, K - k)]).ravel())
        self.epochs.append(epoch)
        self.heat.append(pack(np.concatenate(hs)))
        self.top_i.append(pack(np.concatenate(ti)))
        self.top_w.append(pack(np.concatenate(tw)))
        self.spans.append(sc)

    def _analysis(self, a: Analysis) -> dict:
        """The viewer's share of a snapshot's heads: roles and every per-head quantity the viewer
        shows (heads.quantities), rollout / flow pooled like the heat maps (one byte a weight), each
        token's relevance (3 significant digits)."""
        def pooled(ms):
            if ms is None:
                return None
            return pack(np.concatenate([weight_bytes(fit(m, toks, self.viewer_tokens, self.long)[0], False).ravel()
                                        for m, toks in zip(ms, self.tokens)]))

        def digits(x):
            return None if x is None else [float(f"{v:.3g}") for v in np.asarray(x, dtype=float).ravel()]

        return {"roles": None if a.roles is None else [str(r) for r in np.asarray(a.roles).ravel()],
                "scores": {k: digits(v) for k, v in quantities.shown("viewer", a.scores).items()},
                "layer_importance": digits(a.layer_importance),
                "heads_90": a.heads_90, "rollout": pooled(a.rollout), "flow": pooled(a.flow),
                "relevance": None if a.relevance is None else [
                    {"pred": r["pred"], "true": r["true"], "p": digits(r["pred_scores"]), "t": digits(r["true_scores"])}
                    for r in a.relevance],
                "skipped": dict(a.skipped), "notes": dict(a.notes)}

    def write(self, path: Path, title: str, scale: str = "row", layers: int = 0, heads: int = 0,
              timeline: dict | None = None) -> None:
        """timeline: the heads over training (`timeline_data`), drawn under the maps; a click on a
        reading shows the maps of its epoch."""
        data = {"title": title, "layers": layers, "heads": heads, "epochs": self.epochs, "examples": self.examples,
                "signed": self.signed, "rows": self.rows, "spans": self.spans, "K": K, "scales": SCALES, "scale": scale,
                "heat": self.heat, "top_i": self.top_i, "top_w": self.top_w, "analysis": self.analysis,
                "classes": self.class_names, "labels": quantities.labels("viewer"), "timeline": timeline}
        page = fill(TEMPLATE.read_text(), {"__TITLE__": html.escape(title), "__DATA__": script_json(data)})
        write_bytes(path, page.encode("utf-8"))  # whole or not at all: a full disk left a 0-byte viewer.html


def write_viewer(path: Path, history: list[tuple], tokens: list[list[str]], viewer_tokens: int,
                 title: str, long: str = "blocks", scale: str = "row", class_names: list[str] | None = None) -> None:
    """history: (epoch, maps (L, B, H, T, T)[, the reading (heads.analysis.read_heads)]) per snapshot;
    tokens: per example (their real length)."""
    v = Viewer(tokens, viewer_tokens, long, signed=any(is_signed(h[1]) for h in history), class_names=class_names)
    for epoch, w, *a in history:
        v.add(epoch, w, *a)
    L, _, H = history[0][1].shape[:3]
    v.write(path, title, scale, L, H)


def timeline_data(t, formations: list, names: tuple[str, ...], changes: list = ()) -> dict | None:
    """The viewer's share of a heads timeline (heads.timeline.Timeline): the readings' steps and
    epochs, each of `names` present as (readings x layers x heads) flat at 3 digits, the loss and
    the in-context score, the LLC and its critical points (`changes` named llc) where it was
    estimated, and the formations. None without two readings."""
    if len(t.readings) < 2:
        return None
    scalar = lambda name: [None if not np.isfinite(v) else float(f"{v:.4g}") for v in t.scalar(name)]  # noqa: E731
    return {"steps": t.steps.tolist(), "epochs": [r.epoch for r in t.readings],
            "values": {n: [float(f"{v:.3g}") for v in t.curve(n).ravel()] for n in names if t.curve(n) is not None},
            "loss": scalar("loss"), "icl": scalar("icl"),
            **({"icl_plain": scalar("icl_plain")} if np.isfinite(t.scalar("icl_plain")).any() else {}),
            **({"llc": scalar("llc"), "stages": [c.step for c in changes if c.name == "llc"]}
               if np.isfinite(t.scalar("llc")).any() else {}),
            "formations": [{"layer": f.layer, "head": f.head, "role": f.role, "quantity": f.quantity, "step": f.step}
                           for f in formations]}
