"""Where the heads and the run's curves changed over training, read from a timeline (heads.timeline),
and which heads formed.

Change points: ruptures' PELT (Killick et al. 2012) with the l2 cost on each head's curve, penalty
2 sigma^2 ln N (the BIC-type penalty of Yao 1988, sigma from the curve's own step-to-step noise: the
median absolute difference / (0.6745 sqrt 2)), so the same curve needs the same evidence whatever
its scale and length. A change point alone is not a formation (a slow drift also yields one): a
head *became* a role at the first change after which its segment's mean reaches the role's
threshold (heads.roles), every earlier segment's mean being below it, and that mean at least
MIN_RISE above the lowest earlier one (a rise over two quick changes counts whole); its step is
that of the largest rise up to the crossing (a head that jumps from 0.1 to 0.48 and drifts to 0.53
formed at the jump). The interval is the two readings the change fell between: the schedule's
resolution, which is all the file can say.
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import asdict, dataclass

import numpy as np

from attnexp.heads.timeline import Timeline

MIN_RISE = 0.2  # a formation: the role's score rises at least this much across the change


class _Dated:
    def as_dict(self) -> dict:
        """For JSON (summary.json): the interval as a list."""
        return {**asdict(self), "interval": list(self.interval)}


@dataclass(frozen=True)
class Formation(_Dated):
    """Head (layer, head) became `role` (its score `quantity` rose from `before` to `after`) between
    the readings at steps interval[0] and interval[1]; `step` is the first reading after the change."""

    layer: int
    head: int
    role: str
    quantity: str
    step: int
    interval: tuple[int, int]
    before: float
    after: float

    def line(self) -> str:
        from attnexp.heads.roles import SAID

        role = SAID.get(self.role, self.role)
        article = "an" if role[:1] in "aeiou" else "a"
        return (f"L{self.layer} H{self.head} became {article} {role} head at step {self.step} "
                f"({self.interval[0]}-{self.interval[1]}; {self.quantity} {self.before:.2f} -> {self.after:.2f})")


@dataclass(frozen=True)
class Change(_Dated):
    """A change point in a run-level curve (the loss, the in-context score): mean `before` -> `after`."""

    name: str
    step: int
    interval: tuple[int, int]
    before: float
    after: float


def available() -> bool:
    return importlib.util.find_spec("ruptures") is not None


NEEDS = "change points need ruptures: pip install 'attnexp[timeline]' (or set maps.change_points=false)"


def breakpoints(x: np.ndarray, penalty: float | None = None) -> list[int]:
    """Indices k where a new segment of `x` (N,) starts (0 < k < N), by PELT with the l2 cost and the
    penalty 2 sigma^2 ln N (module docstring) unless one is given."""
    try:
        import ruptures
    except ImportError:
        raise ImportError(NEEDS) from None
    x = np.asarray(x, dtype=float)
    n = len(x)
    if n < 4 or not np.isfinite(x).all():
        return []
    if penalty is None:
        sigma = np.median(np.abs(np.diff(x))) / (0.6745 * math.sqrt(2))
        penalty = 2 * max(sigma, 1e-3 * (np.ptp(x) or 1.0)) ** 2 * math.log(n)
    ends = ruptures.Pelt(model="l2", min_size=2, jump=1).fit(x.reshape(-1, 1)).predict(pen=penalty)
    return [k for k in ends if 0 < k < n]


def _segments(x: np.ndarray, ks: list[int]) -> list[tuple[int, int, float]]:
    edges = [0, *ks, len(x)]
    return [(a, b, float(x[a:b].mean())) for a, b in zip(edges[:-1], edges[1:])]


def formations(t: Timeline, penalty: float | None = None) -> list[Formation]:
    """For every head and role: the first change where the head became that role (module docstring),
    in the order of their steps."""
    from attnexp.heads.roles import ROLES, THRESHOLDS

    steps, out = t.steps, []
    for role, (name, threshold) in THRESHOLDS.items():
        curve = t.curve(name)
        if curve is None:
            continue
        for layer in range(t.layers):
            for head in range(t.heads):
                x = curve[:, layer, head]
                if not (np.nanmax(x, initial=-np.inf) >= threshold and np.ptp(x) >= MIN_RISE):
                    continue  # no segment can reach the threshold, or rise by MIN_RISE: PELT cannot find one
                segs = _segments(x, breakpoints(x, penalty))
                j = next((j for j, (_, _, mean) in enumerate(segs) if mean >= threshold), None)
                if not j:  # never reached, or reached from the first reading on (nothing formed)
                    continue
                low = min(mean for _, _, mean in segs[:j])  # a rise over several changes counts whole
                after = segs[j][2]
                if after - low >= MIN_RISE:  # when: the largest of the rises up to the crossing
                    i = max(range(1, j + 1), key=lambda i: segs[i][2] - segs[i - 1][2])
                    k = segs[i][0]
                    out.append(Formation(layer, head, role, name, int(steps[k]), (int(steps[k - 1]), int(steps[k])),
                                         segs[i - 1][2], after))
    # a head that became two roles at one change is said once, as the role heads.roles would give it
    # (ROLES' order: a previous-token head is local too)
    first = {}
    for f in sorted(out, key=lambda f: ROLES.index(f.role)):
        first.setdefault((f.layer, f.head, f.step), f)
    return sorted(first.values(), key=lambda f: (f.step, f.layer, f.head))


MIN_CHANGE_NATS = 0.3  # a run-level change smaller than this is drift (a 1-layer control wiggles by 0.05-0.2)


def changes(t: Timeline, penalty: float | None = None, min_share: float = 0.25,
            min_nats: float = MIN_CHANGE_NATS) -> list[Change]:
    """The abrupt changes of the run-level curves (loss, probe_loss, icl) whose size is at least
    `min_share` of the curve's whole range and at least `min_nats` (all three curves are in nats): the
    loss's plateau ending, the in-context score's drop. The absolute gate keeps a flat curve's wiggles
    out: a share of a small range is small (the 1-layer controls reported 2-5 changes of 0.05-0.2 nats)."""
    steps, out = t.steps, []
    for name in ("loss", "probe_loss", "icl"):
        x = t.scalar(name)
        ok = np.isfinite(x)
        if ok.sum() < 4:
            continue
        xs, ss = x[ok], steps[ok]
        span = float(np.ptp(xs)) or 1.0
        segs = _segments(xs, breakpoints(xs, penalty))
        for (_, _, before), (k, _, after) in zip(segs[:-1], segs[1:]):
            if abs(after - before) >= max(min_share * span, min_nats):
                out.append(Change(name, int(ss[k]), (int(ss[k - 1]), int(ss[k])), before, after))
    return out
