"""Damaged versions of a file of JSON lines, for the property tests of the files attnexp reads from
strangers (a timeline, an Optuna journal): cut short, a line replaced by junk JSON, by brackets nested
deep or by raw bytes, or one field of a line given a value of any type."""

from __future__ import annotations

import json

from hypothesis import strategies as st

JUNK = st.recursive(st.none() | st.booleans() | st.integers(-10**30, 10**30) | st.floats() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=8)


def damage(fields: list[str], cut: int = 3000):
    """How to damage the file: ("cut", at), ("junk" | "nested" | "bytes", the line), ("field", (key, value))."""
    return st.one_of(
        st.tuples(st.just("cut"), st.integers(0, cut)),
        st.tuples(st.just("junk"), JUNK.map(json.dumps)),
        st.tuples(st.just("nested"), st.integers(1_000, 100_000).map(lambda n: "[" * n + "]" * n)),
        st.tuples(st.just("bytes"), st.binary(max_size=60).map(lambda b: b.decode("latin-1"))),
        st.tuples(st.just("field"), st.sampled_from(fields).flatmap(lambda k: JUNK.map(lambda v: (k, v)))),
    )


def damaged(lines: list[str], how, where: int, first_record: int = 0) -> str:
    """The file's text with `how` done at line `where` (modulo the lines); a field is changed on a line
    from `first_record` on (a header line before it is left to the other kinds)."""
    kind, what = how
    lines = list(lines)
    k = where % len(lines)
    if kind == "cut":
        return "\n".join(lines)[:what]
    if kind in ("junk", "nested", "bytes"):
        lines[k] = what
    else:
        key, value = what
        k = max(k, first_record)
        d = json.loads(lines[k])
        d[key] = value
        lines[k] = json.dumps(d)
    return "\n".join(lines) + "\n"
