"""Per-head statistics of attention maps, over the real (non-padding) query rows.

Input: w (L, B, H, T, T) numpy array of attention weights and lengths (B,) of real tokens.
"""

from __future__ import annotations

import numpy as np

LABELS = {"entropy": "row entropy (nats)", "distance": "mean distance |i-j|", "first_token": "mass on the first token",
          "row_mass": "row mass (1 for softmax rows)", "sink_mass": "mass on no token",
          "head_diversity": "diversity from the other heads (JS)", "alignment": "alignment with the required keys",
          "drift": "change since training started (JS)"}


def _rows(lengths, T):
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


def head_stats(w: np.ndarray, lengths) -> dict[str, np.ndarray]:
    """Each (L, H): entropy (nats), mean attended distance |i - j|, mass on the first token, the row
    mass (what a row sums to: 1 for softmax rows; below 1 where mass goes to no token, as with a
    sink or softpick; 1 - lambda for differential maps), the sink mass (1 - row mass where
    positive: the weight placed on no token), and per layer the heads' mean pairwise
    Jensen-Shannon divergence (0 = identical heads). Entropy, distance and divergence are of each
    row's shares (`shares`), so they mean the same for every variant; first-token, row and sink
    mass are of the weights as applied."""
    T = w.shape[-1]
    real = _rows(lengths, T)[None, :, None, :]  # (1, B, 1, T)
    n_rows = _rows(lengths, T).sum()
    s = shares(w)
    entropy = row_entropy(s)  # (L, B, H, T)
    dist = np.abs(np.arange(T)[:, None] - np.arange(T)[None, :])
    distance = (s * dist).sum(-1)
    first = w[..., 0]
    mass = w.sum(-1)

    def mean(x):  # over real rows -> (L, H)
        return (x * real).sum((1, 3)) / n_rows

    return {"entropy": mean(entropy), "distance": mean(distance), "first_token": mean(first),
            "row_mass": mean(mass), "sink_mass": mean(np.clip(1 - mass, 0, None)),
            "head_diversity": head_diversity(s, real, n_rows)}


def head_diversity(w, real, n_rows) -> np.ndarray:
    """(L, H): each head's mean Jensen-Shannon divergence from the other heads of its layer."""
    L, B, H, T, _ = w.shape
    out = np.zeros((L, H))
    if H == 1:
        return out
    for a in range(H):
        for b in range(a + 1, H):
            pa, pb = w[:, :, a], w[:, :, b]
            m = 0.5 * (pa + pb)
            js = 0.5 * (_kl(pa, m) + _kl(pb, m))  # (L, B, T)
            d = (js * real[:, :, 0]).sum((1, 2)) / n_rows
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
    real = _rows(lengths, T)[None, :, None, :]
    d = js(shares(w), shares(start))  # (L, B, H, T)
    return (d * real).sum((1, 3)) / _rows(lengths, T).sum()


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


def flat(stats: dict[str, np.ndarray], prefix: str = "attn", per_head: bool = True) -> dict[str, float]:
    """{'attn/L0/entropy': ...} (each layer's mean over its heads) for scalar loggers, and with
    `per_head` {'attn/L0H1/entropy': ...} too: 21 charts a head would be ~3,000 at GPT-2's shape."""
    out = {}
    for name, a in stats.items():
        for layer in range(a.shape[0]):
            if per_head:
                for head in range(a.shape[1]):
                    out[f"{prefix}/L{layer}H{head}/{name}"] = float(a[layer, head])
            out[f"{prefix}/L{layer}/{name}"] = float(a[layer].mean())
    return out
