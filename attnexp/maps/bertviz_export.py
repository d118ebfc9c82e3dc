"""bertviz's head view and model view (Vig 2019) of the probe set, written as standalone HTML next
to attnexp's own viewer: `maps.bertviz=true` when training, `bertviz=true` for `attnexp maps`.
bertviz renders in a notebook; with html_action="return" it hands back the page, which we save.
bertviz's pages load require.js, d3 and jQuery from cdnjs; ours carry d3 and jQuery inline
(attnexp/maps/vendor/, the versions bertviz asks for) and a two-line stand-in for require.js, so a
page draws offline: on a cluster node, from an archived run dir."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from attnexp.config import ConfigError

VENDOR = Path(__file__).parent / "vendor"
CDN_REQUIRE = '<script src="https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.6/require.min.js"></script>'
# bertviz's script calls require.config(...) then requirejs(["jquery", "d3"], fn): hand it the inlined libraries.
SHIM = "window.require = {config: function () {}}; window.requirejs = function (deps, fn) { fn(window.jQuery, window.d3); };"


def _libraries() -> str:
    libs = [(VENDOR / name).read_text(encoding="utf-8") for name in ("jquery-2.2.4.min.js", "d3-5.7.0.min.js")]
    return "".join(f"<script>{js}</script>\n" for js in libs) + f"<script>{SHIM}</script>\n"


def available() -> bool:
    import importlib.util

    return importlib.util.find_spec("bertviz") is not None


def require() -> None:
    if not available():
        raise ConfigError("maps.bertviz=true needs bertviz: pip install 'attnexp[hf]' (or set maps.bertviz=false)")


def write(out_dir: Path, w: np.ndarray, probe) -> list[Path]:
    """w: (L, B, H, T, T) weights of the probe set; one head_view and one model_view page per
    example. A sentence pair (token types, from `attnexp maps hf=... text_pair=...`) is split
    where segment B starts."""
    import torch
    from bertviz import head_view, model_view

    paths, libs = [], _libraries()
    for b, toks in enumerate(probe.tokens):
        n = len(toks)
        attn = [torch.from_numpy(np.ascontiguousarray(w[layer, b, :, :n, :n], dtype=np.float32))[None]
                for layer in range(w.shape[0])]
        types = probe.types[b] if probe.types else []
        split = types.index(1) if 1 in types else None
        for name, view in (("head", head_view), ("model", model_view)):
            page = view(attn, list(toks), sentence_b_start=split, html_action="return")
            path = out_dir / f"bertviz_{name}_view_ex{b}.html"
            path.write_text("<!doctype html><html><head><meta charset=utf-8>"
                            f"<title>bertviz {name} view, example {b}</title></head>"
                            f"<body>{libs}{page.data.replace(CDN_REQUIRE, '')}</body></html>", encoding="utf-8")
            paths.append(path)
    return paths
