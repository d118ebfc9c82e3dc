"""bertviz's head view and model view (Vig 2019) of the probe set, written as standalone HTML next
to attnexp's own viewer: `maps.bertviz=true` when training, `bertviz=true` for `attnexp maps`.
bertviz renders in a notebook; with html_action="return" it hands back the page, which we save.
bertviz's pages load require.js, d3 and jQuery from cdnjs; ours carry d3 and jQuery inline
(attnexp/maps/vendor/, the versions bertviz asks for) and a two-line stand-in for require.js, so a
page draws offline: on a cluster node, from an archived run dir."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from attnexp.config import ConfigError
from attnexp.maps.render import write_bytes

VENDOR = Path(__file__).parent / "vendor"
CDN_REQUIRE = '<script src="https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.6/require.min.js"></script>'
# bertviz's script calls require.config(...) then requirejs(["jquery", "d3"], fn): hand it the inlined libraries.
SHIM = "window.require = {config: function () {}}; window.requirejs = function (deps, fn) { fn(window.jQuery, window.d3); };"


def _libraries() -> str:
    libs = [(VENDOR / name).read_text(encoding="utf-8") for name in ("jquery-2.2.4.min.js", "d3-5.7.0.min.js")]
    return "".join(f"<script>{js}</script>\n" for js in libs) + f"<script>{SHIM}</script>\n"


def available() -> bool:
    return importlib.util.find_spec("bertviz") is not None


def require() -> None:
    if not available():
        raise ConfigError("maps.bertviz=true needs bertviz: pip install 'attnexp[hf]' (or set maps.bertviz=false)")


def escape_params(page: str, view: str) -> str:
    """bertviz writes its data, tokens included, as raw JSON into a <script>: its view's .js with
    every PYTHON_PARAMS replaced by json.dumps(params) (twice: the marker also sits in a comment).
    A token `</script>` would end the script and the rest become markup. Locate that JSON through
    bertviz's own template and escape <, > and & in it (\\u escapes: the same strings to the
    script, nothing the HTML parser acts on)."""
    import bertviz

    parts = (Path(bertviz.__file__).parent / f"{view}_view.js").read_text(encoding="utf-8").split("PYTHON_PARAMS")
    tail = "\n</script>\n"
    start = page.find(parts[0])
    script = page[start:len(page) - len(tail)] if start >= 0 and page.endswith(tail) else ""
    n = (len(script) - sum(map(len, parts))) // max(len(parts) - 1, 1)
    params = script[len(parts[0]):len(parts[0]) + n]
    if not script or params.join(parts) != script:
        raise ConfigError("bertviz's page is not laid out as attnexp expects (its version changed?); its views were "
                          "not written, attnexp's own viewer.html was")
    safe = params.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return page[:start] + safe.join(parts) + tail


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
            page = escape_params(view(attn, list(toks), sentence_b_start=split, html_action="return").data, name)
            path = out_dir / f"bertviz_{name}_view_ex{b}.html"
            write_bytes(path, ("<!doctype html><html><head><meta charset=utf-8>"  # whole or not at all
                               f"<title>bertviz {name} view, example {b}</title></head>"
                               f"<body>{libs}{page.replace(CDN_REQUIRE, '')}</body></html>").encode())
            paths.append(path)
    return paths
