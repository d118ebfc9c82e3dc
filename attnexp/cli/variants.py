"""`python -m attnexp variants`: one row per `attention=` option of conf/attention/ (what a user
types), the variant it selects with what it sets, its backends and what its weights are."""

from __future__ import annotations

import sys


def options() -> list[dict]:
    """conf/attention/*.yaml: each option's variant and the settings it adds (mask, n_kv_heads, ...)."""
    from omegaconf import OmegaConf

    from attnexp import attention
    from attnexp.config.paths import conf_dir

    rows = []
    for path in sorted((conf_dir() / "attention").glob("*.yaml")):
        node = OmegaConf.to_container(OmegaConf.load(path))
        variant = attention.canonical(str(node.get("name")))
        sets = ", ".join(f"{k}={v}" for k, v in node.items() if k not in ("defaults", "name"))
        rows.append({"attention=": path.stem, "variant": variant, "sets": sets or "-"})
    from attnexp.config import plugins

    for name, cls in attention.registered().items():  # an installed package's variant: attention=NAME, no yaml
        if plugins.plugin_of(cls):
            rows.append({"attention=": name, "variant": name, "sets": f"- (plugin: {plugins.plugin_of(cls)})"})
    return rows


def variants_cli(argv: list[str]) -> int:
    from attnexp import attention

    if argv in (["-h"], ["--help"]):
        print("usage: python -m attnexp variants\n  every attention= option: the variant it selects, what it sets, its "
              "backends (eager, sdpa, flex), the rows its weights form and its positions")
        return 0
    if argv:
        print(f"attnexp variants: takes no arguments (got {' '.join(map(repr, argv))}); it lists every attention= "
              f"option and variant", file=sys.stderr)
        return 2

    about = {r["variant"]: r for r in attention.matrix()}
    rows = [{**o, **{k: about[o["variant"]][k] for k in ("backends", "rows", "positions", "about")}} for o in options()]
    cols = ["attention=", "variant", "sets", "backends", "rows", "positions"]
    width = {c: max(len(c), *(len(r[c]) for r in rows)) for c in cols}
    print("  ".join(c.ljust(width[c]) for c in cols).rstrip())
    print("  ".join("-" * width[c] for c in cols))
    for r in rows:
        print("  ".join(r[c].ljust(width[c]) for c in cols).rstrip())
    print("\nWhat each variant is:")
    for name, r in about.items():
        say(f"{name}: {r['about']}", "  ")
    unreachable = sorted(set(about) - {r["variant"] for r in rows})
    if unreachable:
        print(f"\nRegistered without a conf/attention option (select with attention.name=...): {', '.join(unreachable)}")
    print("\nWhere a variant has no fused backend:")
    for name, r in about.items():
        if r["why"]:
            say(f"{name}: {r['why']}", "  ")
    print()
    say("Every variant takes attention.mask=causal|bidirectional and a padding mask; override the backend with "
        "attention.backend=... (flex trains on CUDA only: forward-only on CPU). rows: what a row of the weights "
        "sums to (1: a distribution over the allowed keys; at most 1: some mass goes to no token; signed: a "
        "difference of maps). Every variant hands back its weights from the eager path of the same module.")
    return 0


def say(text: str, indent: str = "") -> None:
    """Printed within 100 columns (a terminal's width)."""
    import textwrap

    print(textwrap.fill(text, 100, initial_indent=indent, subsequent_indent=indent + "  "))
