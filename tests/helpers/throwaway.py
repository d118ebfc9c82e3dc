"""A module written by a test into a temporary folder and imported, the registry it registers into
restored afterwards: how the adding-a-variant, -statistic and -data-set tests show that one file
(and its yaml) is all a new one needs."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def imported(folder: Path, name: str, source: str, registry: dict):
    """The module `name` with `source`, imported from `folder`; `registry` and sys.modules as they
    were when the block ends."""
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    before = dict(registry)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while it runs
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        registry.clear()
        registry.update(before)
        sys.modules.pop(name, None)
