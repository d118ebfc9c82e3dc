"""Extension without forking: an installed package adds attention variants and data sets through
entry points, as pytest plugins and Hydra's plugin namespace do. Its pyproject says

    [project.entry-points."attnexp.attention"]
    my_variants = "my_package.variants"      # a module whose classes use attnexp.attention.register

    [project.entry-points."attnexp.data"]
    my_data = "my_package.data"              # a module whose configs use attnexp.config.data.register

and each module is imported once, when attnexp's registry of that kind is first read. A plugin that
fails to import (any exception, SystemExit included: a plugin must not end attnexp's command) or that
registers a name or alias of attnexp's own is one line on stderr naming it and its error; attnexp's
own entries still work."""

from __future__ import annotations

import sys
from importlib import import_module
from importlib.metadata import entry_points

GROUPS = ("attnexp.attention", "attnexp.data")
FAILED: dict[str, str] = {}  # "group:name" -> the line said about it (each said once a process)
MODULES: dict[str, str] = {}  # the modules entry points named, imported -> "distribution version" that declared them
_loaded: set[str] = set()


def load(group: str) -> list[str]:
    """Import every module registered under `group`; returns the names of those that imported."""
    if group in _loaded:
        return []
    _loaded.add(group)
    ok = []
    for ep in sorted(entry_points(group=group), key=lambda e: e.name):
        module = ep.value.split(":", 1)[0].strip()
        try:
            import_module(module)
        except KeyboardInterrupt:  # the user's Ctrl-C, not the plugin's error
            raise
        except BaseException as e:  # noqa: BLE001 - a stranger's package: any error is its own (a SystemExit too), ours goes on
            dist = getattr(ep, "dist", None)
            owner = owner_of(ep)
            first = (str(e).splitlines() or [""])[0]
            line = (f"attnexp: plugin {ep.name!r} ({group} = {ep.value}, from {owner}) failed to load: "
                    f"{type(e).__name__}: {first}; fix it or pip uninstall {dist.name if dist else 'it'} "
                    f"(attnexp's own entries still work)")
            FAILED[f"{group}:{ep.name}"] = line
            print(line, file=sys.stderr)
        else:
            ok.append(ep.name)
            MODULES[module] = owner_of(ep)
    return ok


def owner_of(ep) -> str:
    dist = getattr(ep, "dist", None)
    return f"{dist.name} {dist.version}" if dist else "an installed package"


def plugin_of(cls: type) -> str | None:
    """The distribution ("name version") whose entry point defined `cls` (or a submodule of it), or None."""
    return next((owner for m, owner in MODULES.items() if cls.__module__ == m or cls.__module__.startswith(m + ".")), None)


def from_plugin(cls: type) -> bool:
    """Whether `cls` was defined by a module an entry point named (or one of its submodules)."""
    return plugin_of(cls) is not None
