"""The arithmetic of per-head statistics of attention maps, over the real (non-padding) query rows:
shares of a row, entropy, Jensen-Shannon divergence. What is measured and how it is named is
declared in `attnexp.heads.quantities`.

Input: w (L, B, H, T, T) numpy array of attention weights and lengths (B,) of real tokens.
"""

from __future__ import annotations

import numpy as np


def real_rows(lengths, T):
    """(B, T) True at real query positions."""
    return np.arange(T)[None, :] < np.asarray(lengths)[:, None]


def shares(w: np.ndarray) -> np.ndarray:
    """Each row as shares of its absolute mass, |w| / sum |w|: the row itself for softmax rows; for
    rows that are not distributions (a sink's, sigmoid's, differential's signed ones) the shape
    that entropy, distance, diversity and alignment describe."""
    a = np.abs(w)
    return a / np.clip(a.sum(-1, keepdims=True), 1e-12, None)


def row_entropy(s: np.ndarray) -> np.ndarray:
    """Entropy in nats of each row of shares (`shares(w)`): (..., T, T) -> (..., T)."""
    return -(s * np.log(np.clip(s, 1e-12, 1.0))).sum(-1)


def head_diversity(s: np.ndarray, real: np.ndarray, n_rows: int) -> np.ndarray:
    """(L, H): each head's mean Jensen-Shannon divergence from the other heads of its layer, for
    shares `s` (L, B, H, T, T) and real rows `real` (1, B, 1, T)."""
    L, B, H, T, _ = s.shape
    out = np.zeros((L, H))
    if H == 1:
        return out
    for a in range(H):
        for b in range(a + 1, H):
            d = (js(s[:, :, a], s[:, :, b]) * real[:, :, 0]).sum((1, 2)) / n_rows  # (L, B, T) -> (L,)
            out[:, a] += d / (H - 1)
            out[:, b] += d / (H - 1)
    return out


def js(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Jensen-Shannon divergence (nats, in [0, ln 2]) of rows of shares, over the last axis."""
    m = 0.5 * (p + q)
    return 0.5 * (_kl(p, m) + _kl(q, m))


def drift(w: np.ndarray, start: np.ndarray, lengths) -> np.ndarray:
    """(L, H): how far each head's maps moved from `start` (the same probe set's maps before
    training): the Jensen-Shannon divergence between each real query row's shares then and now,
    averaged (0: unchanged; ln 2 = 0.69: rows that share no key)."""
    T = w.shape[-1]
    real = real_rows(lengths, T)[None, :, None, :]
    d = js(shares(w), shares(start))  # (L, B, H, T)
    return (d * real).sum((1, 3)) / real_rows(lengths, T).sum()


def _kl(p, q):
    return (p * (np.log(np.clip(p, 1e-12, 1)) - np.log(np.clip(q, 1e-12, 1)))).sum(-1)


def alignment(w: np.ndarray, targets: list[list[tuple[int, int]]]) -> np.ndarray:
    """(L, H): mean share of its row (`shares`: the weight itself for softmax rows) that each head
    puts, from each target query position, on the key position the task requires. `targets[b]`
    lists (query, key) pairs of example b."""
    w = shares(w)
    L, B, H, T, _ = w.shape
    total, count = np.zeros((L, H)), 0
    for b, pairs in enumerate(targets):
        for q, k in pairs:
            total += w[:, b, :, q, k]
            count += 1
    return total / max(count, 1)
