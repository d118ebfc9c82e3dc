"""The local learning coefficient (LLC) over training, beside the heads (maps.llc=true): Hoogland et
al. (2024, "The Developmental Landscape of In-Context Learning"; TMLR 2025 as "Loss Landscape
Degeneracy Drives Stagewise Development in Transformers") find a language model's developmental
stages as the critical points of its LLC over training. The estimate is devinterp's
(`devinterp.slt.llc.llc`: SGLD chains started at the current weights, LLC = n_beta (mean loss along
the chains - the loss at the weights)), on a fixed set of training windows drawn once a run.

Stages: the LLC's critical points, where its trend turns (a rise becomes a fall or a plateau, or the
reverse). The same change-point search as the heads' (heads.changes.breakpoints: PELT) runs on the
LLC's change from one estimate to the next; each segment it finds is a rise, a fall or a plateau by
its total change against an absolute gate (MIN_LLC_CHANGE), and a boundary is where the kind changes.
"""

from __future__ import annotations

import importlib.util
import random
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass
from functools import partial

import numpy as np

NEEDS = "maps.llc=true needs devinterp: pip install 'attnexp[llc]' (or set maps.llc=false)"
MIN_LLC_CHANGE = 2.0  # a rise or a fall of the LLC: at least this much over a segment (else a plateau)


def available() -> bool:
    return importlib.util.find_spec("devinterp") is not None


@dataclass(frozen=True)
class Settings:
    """SGLD's settings (maps.llc_*; scripts/studies/llc_calibration.py chose the defaults)."""

    lr: float
    nbeta: float
    localization: float
    chains: int
    draws: int
    batch_size: int

    def cost(self) -> int:
        """Forward-backward passes of one estimate (and about as many forwards for the loss at the weights)."""
        return self.chains * self.draws


def windows(ids_NT, lengths, n: int, seed: int):
    """`n` training windows for every estimate of a run (drawn once, with the run's seed): rows of the
    split's table at least as long as their median length, cut to it (the built-in LM data sets'
    windows are all one length)."""
    import torch

    lengths = np.asarray(lengths)
    width = int(np.median(lengths))
    rows = np.flatnonzero(lengths >= width)
    pick = np.random.default_rng(seed).choice(rows, size=min(n, len(rows)), replace=False)
    return torch.as_tensor(ids_NT[np.sort(pick), :width])


@dataclass(frozen=True)
class Estimate:
    """One LLC estimate: its value (the mean over the chains), the chains' standard deviation, and
    whether the chains settled: the mean loss over their last quarter of draws moved from that over
    their second quarter by at most a tenth of the loss rise the LLC is made of (devinterp's
    calibration advice: a trace still climbing, or one that blew up, gives no LLC)."""

    value: float
    std: float
    settled: bool


def estimate(model, ids_NT, s: Settings, seed: int) -> Estimate:
    """The LLC of `model` at its current weights on the windows `ids_NT` (next-token loss). The model,
    its mode and the run's random streams (Python's, NumPy's, torch's) are as they were afterwards:
    training goes on as if nothing had been read. A chain that failed (a NaN loss) gives NaN."""
    import torch
    import torch.nn.functional as F
    from datasets import Dataset
    from devinterp.slt import sampler
    from devinterp.slt.llc import llc
    from tqdm import trange

    # devinterp draws a progress bar a chain on the console, in the middle of a run's own lines; it has no
    # switch for it, so its sampler's trange is given one that draws nothing
    sampler.trange = partial(trange, disable=True)

    def token_loss(m, input_ids):  # devinterp's (model, input_ids) -> (batch, seq - 1)
        logits = m(input_ids[:, :-1]).logits
        return F.cross_entropy(logits.transpose(1, 2).float(), input_ids[:, 1:], reduction="none")

    data = Dataset.from_dict({"input_ids": ids_NT.tolist()}).with_format("torch")
    device = str(next(model.parameters()).device)
    states = random.getstate(), np.random.get_state(), torch.random.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    was_training = model.training
    try:
        with tempfile.TemporaryDirectory(prefix="attnexp-llc-") as tmp, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a chain that failed is a NaN here, said by the caller
            out = llc(model, data, {}, lr=s.lr, n_beta=s.nbeta, localization=s.localization, num_chains=s.chains,
                      num_draws=s.draws, batch_size=min(s.batch_size, len(data)),
                      num_init_loss_batches=max(1, min(8, len(data) // s.batch_size)), init_seed=seed, device=device,
                      output_path=f"{tmp}/samples.zarr", loss_fn=token_loss)
            per_chain = np.asarray(out["llc_per_chain"].values, dtype=float)
            trace = np.asarray(out["loss_trace"].values, dtype=float).mean(0)  # (steps,) over the chains
            init = float(out["init_loss"].values)
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.random.set_rng_state(states[2])
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)
        model.train(was_training)
    if not (np.isfinite(per_chain).all() and np.isfinite(trace).all()):
        return Estimate(float("nan"), float("nan"), False)
    q = max(1, len(trace) // 4)
    settled = abs(trace[-q:].mean() - trace[q:2 * q].mean()) <= 0.1 * max(abs(trace.mean() - init), 1e-6)
    return Estimate(float(per_chain.mean()), float(per_chain.std()), bool(settled))


def steps_of(schedule: list[int], k: int) -> list[int]:
    """`k` of the timeline's reading steps after step 0 (the initialisation is no minimum to measure
    around), evenly among them by index (so as dense early as the schedule is), the first and the last
    always."""
    schedule = [s for s in schedule if s > 0]
    if k <= 0 or not schedule:
        return []
    idx = np.unique(np.round(np.linspace(0, len(schedule) - 1, min(k, len(schedule)))).astype(int))
    return [int(schedule[i]) for i in idx]


@dataclass(frozen=True)
class Stage:
    """A stretch of training over which the LLC rose, fell or stayed (`kind`), from reading `start` to `end`."""

    kind: str
    start: int
    end: int
    before: float
    after: float

    def as_dict(self) -> dict:
        return asdict(self)


def stages(steps: np.ndarray, llc: np.ndarray, min_change: float = MIN_LLC_CHANGE) -> list[Stage]:
    """The LLC curve cut at its critical points (module docstring); consecutive stages of one kind are
    one. Readings without an estimate (NaN) are left out."""
    from attnexp.heads.changes import breakpoints

    ok = np.isfinite(llc)
    steps, llc = np.asarray(steps)[ok], np.asarray(llc, dtype=float)[ok]
    if len(llc) < 2:
        return []
    d = np.diff(llc)
    edges = [0, *breakpoints(d), len(d)]
    out: list[Stage] = []
    for a, b in zip(edges[:-1], edges[1:]):  # d[a:b] spans readings a..b
        change = float(llc[b] - llc[a])
        kind = "rise" if change >= min_change else "fall" if change <= -min_change else "plateau"
        if out and out[-1].kind == kind:
            out[-1] = Stage(kind, out[-1].start, int(steps[b]), out[-1].before, float(llc[b]))
        else:
            out.append(Stage(kind, int(steps[a]), int(steps[b]), float(llc[a]), float(llc[b])))
    return out


def changes(t) -> list:
    """The LLC's critical points of a timeline as run-level changes named "llc" (heads.changes.Change:
    drawn and reported with the loss's and the in-context score's)."""
    from attnexp.heads.changes import Change

    x = t.scalar("llc")
    read = t.steps[np.isfinite(x)].tolist()
    found = stages(t.steps, x)
    around = lambda s: (read[max(0, read.index(s) - 1)], read[min(len(read) - 1, read.index(s) + 1)])  # noqa: E731
    return [Change("llc", b.start, around(b.start), a.before, b.after) for a, b in zip(found[:-1], found[1:])]


def stages_said(t) -> dict:
    """summary.json's account of the LLC stages."""
    return {"stages": [s.as_dict() for s in stages(t.steps, t.scalar("llc"))], "min_change": MIN_LLC_CHANGE}


class Reader:
    """The LLC at the readings it is due (maps.llc): what the maps callback asks at each reading."""

    def __init__(self, cfg, schedule: list[int], ids_NT, lengths, seed: int):
        self.settings = Settings(cfg.llc_lr, cfg.llc_nbeta, cfg.llc_localization, cfg.llc_chains, cfg.llc_draws, 32)
        self.steps = frozenset(steps_of(sorted(schedule), cfg.llc_readings))
        self.ids = windows(ids_NT, lengths, cfg.llc_examples, seed)
        self.seed = seed  # one seed for every estimate: the same chains' noise and batches at each reading
        self.seconds, self.done, self.unsettled = 0.0, 0, 0

    def at(self, step: int, model) -> tuple[float | None, float | None]:
        if step not in self.steps:
            return None, None

        start = time.perf_counter()
        e = estimate(model, self.ids, self.settings, self.seed)
        self.seconds += time.perf_counter() - start
        self.done += 1
        self.unsettled += not e.settled
        return e.value, e.std

    def summary(self) -> dict:
        """What summary.json says of the estimates: how many, their settings and what they cost."""
        return {"estimates": self.done, "unsettled": self.unsettled, "seconds": round(self.seconds, 1),
                "windows": list(self.ids.shape), "passes_each": self.settings.cost(), "settings": asdict(self.settings)}
