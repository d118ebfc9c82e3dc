"""Reading one command-line override string (no Hydra here: `compare` and the report use it too)."""

from __future__ import annotations


def split_override(override: str) -> tuple[str, str]:
    """`+model.init=hf:x` -> ("model.init", "hf:x"): the key without Hydra's +/~/++ prefix, and the value."""
    key, _, value = override.lstrip("+~").partition("=")
    return key, value
