"""`python -m attnexp variants`: the attention variants, their masks and backends, what their
weights are."""

from __future__ import annotations


def variants_cli(argv: list[str]) -> int:
    from attnexp import attention

    rows = attention.matrix()
    cols = ["variant", "masks", "backends", "rows", "positions", "about"]
    width = {c: max(len(c), *(len(r[c]) for r in rows)) for c in cols}
    print("  ".join(c.ljust(width[c]) for c in cols))
    print("  ".join("-" * width[c] for c in cols))
    for r in rows:
        print("  ".join(r[c].ljust(width[c]) for c in cols))
    print("\nWhere a variant has no fused backend:")
    for r in rows:
        if r["why"]:
            print(f"  {r['variant']}: {r['why']}")
    print("\nSelect with attention=<variant> (conf/attention/*.yaml), override with attention.mask=... attention.backend=...")
    print("flex trains on CUDA only (forward-only on CPU). rows: what a row of the weights sums to (1: a distribution "
          "over the allowed keys; at most 1: some mass goes to no token; signed: a difference of maps). Every variant "
          "hands back its weights from the eager path of the same module.")
    return 0
