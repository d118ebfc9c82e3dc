"""attnexp: training experiments for attention mechanisms.

`attnexp.load(ckpt)`, `attnexp.train(run)`, `attnexp.evaluate(ckpt)`, ... are attnexp.api's, imported
on first use (so `import attnexp` stays light and the command line's start-up does not pay for torch)."""

__version__ = "0.1.0"

_API = ("load", "train", "evaluate", "sample", "compose", "load_run", "draw_maps")


def __getattr__(name: str):
    if name in _API:
        from attnexp import api

        return getattr(api, name)
    raise AttributeError(f"module 'attnexp' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_API])
