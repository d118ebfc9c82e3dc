"""A self-contained HTML viewer (no network, no external script): pick epoch, layer, head and
example; the map is drawn on a canvas with token labels, hover shows the weight.

Maps are embedded as base64 uint8 (weight * 255), cropped to maps.max_tokens per example."""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

import numpy as np

TEMPLATE = Path(__file__).with_name("viewer.html")


def write_viewer(path: Path, history: list[tuple[int, np.ndarray]], tokens: list[list[str]], max_tokens: int,
                 title: str) -> None:
    """history: (epoch, maps (L, B, H, T, T)) per snapshot; tokens: per example. Both are cropped
    to the first `max_tokens` tokens here."""
    history = [(e, w[..., :max_tokens, :max_tokens]) for e, w in history]
    L, B, H = history[0][1].shape[:3]
    data = {
        "title": title, "layers": L, "heads": H, "T": history[0][1].shape[-1],
        "epochs": [e for e, _ in history],
        "tokens": [t[:max_tokens] for t in tokens],
        "maps": [base64.b64encode(np.clip(np.rint(w * 255), 0, 255).astype(np.uint8).tobytes()).decode()
                 for _, w in history],
    }
    page = TEMPLATE.read_text().replace("__TITLE__", html.escape(title)).replace(
        "__DATA__", json.dumps(data).replace("</", "<\\/"))
    path.write_text(page, encoding="utf-8")
