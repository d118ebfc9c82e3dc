"""Every per-head number attnexp measures, declared once (TransformerLens's `HEAD_NAMES` is the
model): its name, label, kind, what a higher value means and where it is shown. Every list of
per-head numbers is derived from here: the logged scalars (`<prefix>/L{l}/<name>`, and
`<prefix>/L{l}H{h}/<name>` with maps.head_scalars), one histogram each (`heads/<name>`), the
per-head table, the snapshot (`stat_<name>`), the report's figure and the viewer.

A statistic of the maps alone is one function registered with `@statistic`: `measure` computes it
at every snapshot (training, `attnexp maps`, the notebook) and it is shown everywhere with no
other edit. Scores that need an input or a loss of their own (the patterns of `heads.roles`, the
induction pair, importance) are computed by `heads.analysis` and declared here with `declare`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from attnexp.heads import stats

PLACES = ("scalars", "histogram", "table", "report", "viewer")
KINDS = {"maps": "a statistic of the probe set's maps (`measure`)",
         "pattern": "a share of each row on one pattern's keys (heads.roles)",
         "probe": "measured on an input of its own (the induction probe)",
         "ablation": "a change of the loss with the head silenced (heads.importance)"}
ANALYSED = ("pattern", "probe", "ablation")  # the kinds heads.analysis computes


@dataclass(frozen=True)
class Quantity:
    name: str
    label: str  # the report's and the table's name for it
    kind: str  # one of KINDS
    higher: str  # what a higher value means
    short: str = ""  # the viewer's name for it, where the label is too long for its line
    shown: frozenset[str] = frozenset(PLACES)
    compute: Callable[[Maps], np.ndarray | None] | None = None  # kind "maps": (L, H), or None where it does not apply
    member: str = ""  # its array in a snapshot: stat_<name> unless said
    prefix: str = "attn"  # of its logged scalars

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"per-head quantity {self.name!r}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if not set(self.shown) <= set(PLACES):
            raise ValueError(f"per-head quantity {self.name!r}: shown in {sorted(self.shown)}, not a subset of {PLACES}")
        object.__setattr__(self, "member", self.member or f"{STAT_PREFIX}{self.name}")


STAT_PREFIX = "stat_"
QUANTITIES: dict[str, Quantity] = {}


def declare(name: str, label: str, kind: str, higher: str, short: str = "", shown=PLACES,
            compute: Callable | None = None, member: str = "", prefix: str = "attn") -> Quantity:
    """Registers one per-head quantity; a second declaration of a name by another function is an error."""
    q = Quantity(name, label, kind, higher, short, frozenset(shown), compute, member, prefix)
    old = QUANTITIES.get(name)
    if old is not None and _origin(old.compute) != _origin(compute):
        raise ValueError(f"per-head quantity {name!r} is declared twice: by {_origin(old.compute)} and {_origin(compute)}")
    QUANTITIES[name] = q
    return q


def _origin(fn) -> str | None:
    return None if fn is None else f"{fn.__module__}.{fn.__qualname__}"


def statistic(name: str, label: str, higher: str, short: str = "", shown=PLACES, member: str = "", prefix: str = "attn"):
    """Decorator: `fn(maps: Maps) -> (L, H)` (or None where it does not apply) becomes a statistic
    every snapshot measures and every place shows."""
    def wrap(fn):
        declare(name, label, "maps", higher, short, shown, fn, member, prefix)
        return fn
    return wrap


class Maps:
    """One snapshot's maps as the statistics read them: w (L, B, H, T, T), the real lengths (B,),
    and where there are some, the maps before training (`start`, same shape) and the task's
    (query, key) targets per example; each row's shares and the real rows are computed once."""

    def __init__(self, w: np.ndarray, lengths, start: np.ndarray | None = None, targets=None):
        self.w, self.lengths, self.targets = w, list(lengths), targets
        self.start = start if start is not None and start.shape == w.shape else None
        self.T = w.shape[-1]

    @cached_property
    def shares(self) -> np.ndarray:
        return stats.shares(self.w)

    @cached_property
    def real(self) -> np.ndarray:
        """(1, B, 1, T): True at real query rows."""
        return stats.real_rows(self.lengths, self.T)[None, :, None, :]

    @cached_property
    def n_rows(self) -> int:
        return int(self.real.sum())

    def mean(self, x: np.ndarray) -> np.ndarray:
        """(L, B, H, T) -> (L, H): the mean over the real query rows."""
        return (x * self.real).sum((1, 3)) / self.n_rows


def measure(maps: Maps) -> dict[str, np.ndarray]:
    """Every registered statistic that applies to `maps`, name -> (L, H)."""
    out = {}
    for q in list(QUANTITIES.values()):
        if q.compute is not None:
            v = q.compute(maps)
            if v is not None:
                out[q.name] = np.asarray(v, dtype=float)
    return out


def shown(place: str, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The values of `values` (name -> (L, H)) that `place` shows, in the order they were declared."""
    return {q.name: values[q.name] for q in QUANTITIES.values() if q.name in values and place in q.shown}


def labels(place: str) -> dict[str, str]:
    """name -> how `place` names it (the viewer's short name where there is one)."""
    return {q.name: (q.short or q.label) if place == "viewer" else q.label for q in QUANTITIES.values()
            if place in q.shown}


def member(name: str) -> str:
    """The snapshot array a quantity is saved as (stat_<name> for one no declaration names)."""
    q = QUANTITIES.get(name)
    return q.member if q else f"{STAT_PREFIX}{name}"


def of_member(member: str) -> str | None:
    """The quantity a snapshot array holds, or None."""
    return next((q.name for q in QUANTITIES.values() if q.member == member), None)


def flat(values: dict[str, np.ndarray], per_head: bool = True) -> dict[str, float]:
    """The scalars of the values `scalars` shows: {'attn/L0/entropy': ...} (each layer's mean over
    its heads) and with `per_head` {'attn/L0H1/entropy': ...} too (21 a head would be ~3,000 at
    GPT-2's shape)."""
    out = {}
    for name, a in shown("scalars", values).items():
        prefix = QUANTITIES[name].prefix
        for layer in range(a.shape[0]):
            if per_head:
                for head in range(a.shape[1]):
                    out[f"{prefix}/L{layer}H{head}/{name}"] = float(a[layer, head])
            out[f"{prefix}/L{layer}/{name}"] = float(a[layer].mean())
    return out


# --- the statistics of the maps alone ------------------------------------------------------------
# Entropy, distance, diversity and alignment are of each row's shares (`stats.shares`), so they mean
# the same for every variant; first-token, row and sink mass are of the weights as applied.

@statistic("entropy", "row entropy (nats)", "rows spread over more keys")
def _entropy(m: Maps):
    return m.mean(stats.row_entropy(m.shares))


@statistic("distance", "mean distance |i-j|", "keys further from the query")
def _distance(m: Maps):
    return m.mean((m.shares * np.abs(np.arange(m.T)[:, None] - np.arange(m.T)[None, :])).sum(-1))


@statistic("first_token", "mass on the first token", "more weight on the first token", short="first token")
def _first_token(m: Maps):
    return m.mean(m.w[..., 0])


@statistic("row_mass", "row mass (1 for softmax rows)", "rows that place more weight in all (1 for softmax)",
           short="row mass")
def _row_mass(m: Maps):
    return m.mean(m.w.sum(-1))


@statistic("sink_mass", "mass on no token", "more weight placed on no token (a sink, softpick)", short="sink mass")
def _sink_mass(m: Maps):
    return m.mean(np.clip(1 - m.w.sum(-1), 0, None))


@statistic("head_diversity", "diversity from the other heads (JS)", "maps less like the other heads' of its layer",
           short="diversity")
def _head_diversity(m: Maps):
    return stats.head_diversity(m.shares, m.real, m.n_rows)


@statistic("alignment", "alignment with the required keys", "more of the row on the key the task requires",
           short="alignment", member="alignment", prefix="align")
def _alignment(m: Maps):
    return None if not m.targets else stats.alignment(m.w, m.targets)


@statistic("drift", "change since training started (JS)", "maps further from the start snapshot's", short="drift")
def _drift(m: Maps):
    return None if m.start is None else stats.drift(m.w, m.start, m.lengths)


# --- computed by heads.analysis -----------------------------------------------------------------
# Not in the report's figure: the report has a figure of its own for roles and importance.
ANALYSIS = frozenset(PLACES) - {"report"}
for _name, _label, _short in (("prev_token", "share on the previous token", "previous"),
                              ("next_token", "share on the next token", "next"),
                              ("self", "share on the token itself", "self"),
                              ("to_first", "share on the first token ([CLS], [BOS])", "first"),
                              ("separator", "share on separators ([SEP], [EOS])", "separator"),
                              ("punctuation", "share on punctuation", "punct."),
                              ("local", "share within two positions", "local"),
                              ("broadness", "row entropy over its most (1: uniform)", "broad")):
    declare(_name, _label, "pattern", "more of the row on these keys" if _name != "broadness" else "flatter rows",
            _short, ANALYSIS)
declare("induction", "induction score (against the control)", "probe", "more mass on the token after the earlier "
        "occurrence than a fixed-offset head puts", "induction", ANALYSIS)
declare("prev_token_rep", "share on the previous token (repeated sequence)", "probe", "more of the row on the token "
        "before, on the induction probe", "prev. (repeated)", ANALYSIS)
declare("importance", "loss increase with the head silenced", "ablation", "the head matters more to the loss",
        "Δloss silenced", ANALYSIS)
declare("importance_acc", "accuracy change with the head silenced", "ablation", "silencing the head helps accuracy",
        "Δacc silenced", ANALYSIS)
