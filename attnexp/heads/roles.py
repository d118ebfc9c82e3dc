"""What each head does, from its maps: a score per pattern and a role per head.

Patterns follow Clark et al. (2019, "What Does BERT Look At?"): the share of each real query
row's mass (`stats.shares`: the weight itself for softmax rows) that goes to the previous token,
the next token, the token itself, the first token ([CLS] / [BOS]), a separator token ([SEP],
[EOS]) or punctuation, averaged over the rows where the pattern is possible (and not forced: a causal model's first
row sees only itself); `broad` is the mean
row entropy over the log of the keys a row may see (1: uniform), `local` the mass within two
positions of the query. On a causal model, Olsson et al.'s (2022) induction pair is measured on a
random token sequence repeated twice (`induction_probe`): `induction`, the mass each token of the
second copy puts on the token after its earlier occurrence, and `prev_token_rep`, its mass on the
token before it, on the same input: the two halves of an induction circuit.

A head's role is the first pattern, in the order of ROLES, whose score reaches its threshold
(THRESHOLDS, stated there), else `mixed`.
"""

from __future__ import annotations

import numpy as np

from attnexp.heads.stats import real_rows, row_entropy, shares

SEPARATORS = {"[SEP]", "[EOS]", "</s>", "<|endoftext|>"}
PUNCTUATION = set(".,;:!?()[]{}\"'-")
# role: the score that decides it and its threshold. Checked in this order; the first reached wins.
ROLES = ("induction", "previous", "next", "self", "first", "separator", "punctuation", "local", "broad")
THRESHOLDS = {"induction": ("induction", 0.4), "previous": ("prev_token", 0.5), "next": ("next_token", 0.5),
              "self": ("self", 0.5), "first": ("to_first", 0.5), "separator": ("separator", 0.5),
              "punctuation": ("punctuation", 0.5), "local": ("local", 0.7), "broad": ("broadness", 0.9)}
# how a role is said in a sentence ("a first-token head"), where its one-word name would not read
SAID = {"previous": "previous-token", "next": "next-token", "first": "first-token", "self": "self-attending"}
SCORES = ("prev_token", "next_token", "self", "to_first", "separator", "punctuation", "local", "broadness")


def _mean_over(mask_BT: np.ndarray, x_LBHT: np.ndarray) -> np.ndarray:
    n = mask_BT.sum()
    return (x_LBHT * mask_BT[None, :, None, :]).sum((1, 3)) / max(int(n), 1)


def pattern_scores(w: np.ndarray, lengths, tokens: list[list[str]], causal: bool) -> dict[str, np.ndarray]:
    """Each (L, H): the share of a row's mass on each pattern's keys (module docstring)."""
    L, B, H, T, _ = w.shape
    s = shares(w)
    real = real_rows(lengths, T)  # (B, T) real query rows
    i = np.arange(T)
    tok = np.array([list(t) + [""] * (T - len(t)) for t in tokens])  # (B, T)
    is_sep = np.isin(tok, list(SEPARATORS))
    is_punct = np.vectorize(lambda t: len(t) > 0 and all(c in PUNCTUATION for c in t))(tok) & ~is_sep
    diag = lambda k: np.take_along_axis(s, np.clip(i + k, 0, T - 1)[None, None, None, :, None], -1)[..., 0]  # noqa: E731
    has_next = real & (i[None, :] + 1 < np.asarray(lengths)[:, None])
    keys_seen = (i + 1) if causal else np.asarray(lengths)[:, None].repeat(T, 1)
    broad = row_entropy(s) / np.log(np.maximum(np.broadcast_to(keys_seen, (B, T)), 2))[None, :, None, :]
    near = (np.abs(i[:, None] - i[None, :]) <= 2)
    return {"prev_token": _mean_over(real & (i[None, :] >= 1), diag(-1)),
            "next_token": _mean_over(has_next, diag(1)),
            "self": _mean_over(real & (i[None, :] >= 1) if causal else real, diag(0)),  # a causal row 0 sees only itself
            "to_first": _mean_over(real & (i[None, :] >= 1), s[..., 0]),
            "separator": _mean_over(real & ~is_sep, (s * is_sep[None, :, None, None, :]).sum(-1)),
            "punctuation": _mean_over(real & ~is_punct, (s * is_punct[None, :, None, None, :]).sum(-1)),
            "local": _mean_over(real, (s * near).sum(-1)), "broadness": _mean_over(real, broad)}


def token_pool(first_word_id: int, vocab_size: int, pool: list[int] | None = None) -> np.ndarray:
    """The tokens a probe draws from: `pool` (the data's frequent tokens: a byte-level model never saw
    most of its 256 bytes, and its induction head does not fire on them), else every word token."""
    return np.asarray(sorted(pool), dtype=int) if pool else np.arange(first_word_id, vocab_size)


def induction_probe(start_id: int, first_word_id: int, vocab_size: int, n: int, seed: int = 0,
                    pool: list[int] | None = None) -> list[int]:
    """[start] r1..rn r1..rn: n distinct random tokens, repeated (Olsson et al.'s test input)."""
    rng = np.random.default_rng(seed)
    tokens = token_pool(first_word_id, vocab_size, pool)
    r = rng.choice(tokens, size=min(n, len(tokens)), replace=False).tolist()
    return [start_id, *r, *r]


def induction_control(ids: list[int], first_word_id: int, vocab_size: int, seed: int = 1,
                      pool: list[int] | None = None) -> list[int]:
    """The control for `induction_probe`'s [start] r1..rn r1..rn: [start] r1..rn s1..sn with s fresh
    random tokens (none of the r's, none repeated), so no query's token occurs earlier and the key at
    the distance an induction head looks holds another token, as in the probe. A vocabulary without
    n fresh tokens gives s = r rotated by two: each query's token then occurs earlier, but neither
    at that distance nor one before it. (The control before, r2..rn r1, put a copy of the query's
    own token at that very distance: a fixed-offset head that avoids its own token scored up to
    0.8 and was called induction.)"""
    n = (len(ids) - 1) // 2
    first = [int(t) for t in ids[1:1 + n]]
    fresh = np.setdiff1d(token_pool(first_word_id, vocab_size, pool), first)
    if len(fresh) >= n:
        second = np.random.default_rng(seed).choice(fresh, size=n, replace=False).tolist()
    else:
        second = first[2:] + first[:2]
    return [ids[0], *first, *second]


CONTROL_DRAWS = 8  # control sequences the induction score is measured against, averaged


def induction_controls(ids: list[int], first_word_id: int, vocab_size: int, k: int = CONTROL_DRAWS,
                       pool: list[int] | None = None) -> list[list[int]]:
    """`k` draws of `induction_control` (seeds 1..k): one draw's own tokens move a head's score by a few
    hundredths; their mean is the baseline."""
    return [induction_control(ids, first_word_id, vocab_size, seed=s, pool=pool) for s in range(1, k + 1)]


def induction_scores(w: np.ndarray, n: int, control: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """(L, H) each, from the maps of one `induction_probe` sequence (B = 1, length 1 + 2n): for each
    query q of the second copy, its share on q - n + 1 (the token after the earlier occurrence of
    its own token) and on q - 1. With the maps of `induction_control`, `induction` is that share
    less the controls' at the same distance, averaged over the control sequences `control` holds (B of
    them; Olsson et al. score against a shuffled baseline too): a head that looks a fixed distance back
    scores the same on both, and 0, not as an induction head."""
    s = shares(w)[:, 0]  # (L, H, T, T)
    q = np.arange(1 + n, 1 + 2 * n)
    out = {"induction": s[:, :, q, q - n + 1].mean(-1), "prev_token_rep": s[:, :, q, q - 1].mean(-1)}
    if control is not None:
        out["induction"] = out["induction"] - shares(control)[:, :, :, q, q - n + 1].mean((1, 3))
    return out


def assign(scores: dict[str, np.ndarray]) -> np.ndarray:
    """(L, H) role names: the first of ROLES whose score reaches its threshold, else `mixed`."""
    shape = next(iter(scores.values())).shape
    out = np.full(shape, "mixed", dtype=object)
    done = np.zeros(shape, dtype=bool)
    for role in ROLES:
        name, threshold = THRESHOLDS[role]
        if name not in scores:
            continue
        hit = (scores[name] >= threshold) & ~done
        out[hit] = role
        done |= hit
    return out.astype(str)
