"""Two classifiers on the same test examples, compared pair by pair (issue 55: "a claim beats noise
or is not made"): McNemar's exact test on the examples where exactly one of them is right, a paired
bootstrap interval of the accuracy difference, and the verdict the docs may state.

    from paired import compare, verdict
    compare(baseline_pred, model_pred, labels)     # {"b_only": .., "a_only": .., "p": .., "diff": .., "ci95": [..]}
    verdict(baseline_acc, [per-seed comparisons])  # "above" | "below" | "on par"
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

ALPHA = 0.05


def mcnemar_p(a_only: int, b_only: int) -> float:
    """McNemar's exact two-sided p: under the null each discordant example is equally likely to favour
    either model, so the smaller count is Binomial(a_only + b_only, 1/2)."""
    from scipy.stats import binomtest

    n = a_only + b_only
    return 1.0 if n == 0 else float(binomtest(min(a_only, b_only), n, 0.5).pvalue)


def compare(a_pred: Sequence[int], b_pred: Sequence[int], labels: Sequence[int], draws: int = 10_000,
            seed: int = 0) -> dict:
    """Model b against model a on the same examples, in the same order."""
    if not len(a_pred) == len(b_pred) == len(labels):
        raise ValueError(f"{len(a_pred)}, {len(b_pred)} and {len(labels)} predictions and labels: not the same examples")
    a_right = np.asarray(a_pred) == np.asarray(labels)
    b_right = np.asarray(b_pred) == np.asarray(labels)
    a_only, b_only = int((a_right & ~b_right).sum()), int((b_right & ~a_right).sum())
    diff = b_right.astype(float) - a_right.astype(float)
    idx = np.random.default_rng(seed).integers(0, len(diff), size=(draws, len(diff)))
    boot = diff[idx].mean(1)
    return {"n": len(diff), "a_acc": round(float(a_right.mean()), 4), "b_acc": round(float(b_right.mean()), 4),
            "a_only": a_only, "b_only": b_only, "p": mcnemar_p(a_only, b_only), "diff": round(float(diff.mean()), 4),
            "ci95": [round(float(np.quantile(boot, 0.025)), 4), round(float(np.quantile(boot, 0.975)), 4)]}


def verdict(comparisons: list[dict]) -> str:
    """What the docs may say of model b against a from several seeds of b: "above" only if every
    seed's paired test finds b better (p < 0.05 with more examples b alone gets right) and every seed's
    accuracy is above a's; "below" the same the other way; else "on par"."""
    if not comparisons:
        return "on par"
    above = all(c["p"] < ALPHA and c["b_only"] > c["a_only"] and c["b_acc"] > c["a_acc"] for c in comparisons)
    below = all(c["p"] < ALPHA and c["a_only"] > c["b_only"] and c["b_acc"] < c["a_acc"] for c in comparisons)
    return "above" if above else "below" if below else "on par"
