"""scripts/paired.py: McNemar's exact test and the verdict rule the docs follow (issue 55 item 1)."""

from __future__ import annotations

import sys

import pytest

from helpers.runs import REPO

sys.path.insert(0, str(REPO / "scripts"))

from paired import compare, mcnemar_p, verdict  # noqa: E402


def test_mcnemar_is_the_exact_binomial_on_the_discordant_examples():
    # 54 of 60 discordant examples favour one model: P(X <= 6 or X >= 54 | n=60, 1/2) by hand
    from math import comb

    tail = sum(comb(60, k) for k in range(7)) / 2**60
    assert mcnemar_p(6, 54) == pytest.approx(2 * tail, rel=1e-9)
    assert mcnemar_p(0, 0) == 1.0 and mcnemar_p(10, 10) == 1.0


def test_compare_counts_the_pairs_and_bounds_the_difference():
    labels = [0] * 1000
    a = [0] * 900 + [1] * 100  # a right on 900
    b = [0] * 850 + [1] * 50 + [0] * 100  # b right on 950: loses 50 of a's, wins a's 100 wrong
    c = compare(a, b, labels)
    assert (c["a_only"], c["b_only"], c["a_acc"], c["b_acc"], c["diff"]) == (50, 100, 0.9, 0.95, 0.05)
    assert c["ci95"][0] < 0.05 < c["ci95"][1] and c["ci95"][0] > 0 and c["p"] < 1e-3
    with pytest.raises(ValueError, match="not the same examples"):
        compare(a, b[:-1], labels)


def test_above_needs_every_seed_to_say_so():
    good = {"p": 0.001, "a_only": 20, "b_only": 60, "a_acc": 0.85, "b_acc": 0.86}
    noisy = {"p": 0.2, "a_only": 40, "b_only": 52, "a_acc": 0.85, "b_acc": 0.852}
    worse = {"p": 0.01, "a_only": 60, "b_only": 20, "a_acc": 0.85, "b_acc": 0.84}
    assert verdict([good, good, good]) == "above"
    assert verdict([good, noisy, good]) == "on par"  # one seed within noise: the claim is not made
    assert verdict([worse, worse]) == "below" and verdict([]) == "on par"
