"""What the heads do and which matter, for one snapshot of the probe set's maps: each head's
pattern scores and role (`roles`), the induction pair on a repeated random sequence (causal
models), each head's and layer's importance on a fixed batch (`importance`), attention rollout
and flow (`explain`), and, for a classifier, each token's relevance to the predicted and the true
class. The training callback and `attnexp maps` both call `analyse`; a method that cannot answer
honestly for these maps is left out and says why (`Analysis.skipped`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from attnexp.config import MapsConfig
from attnexp.maps import explain, importance, roles
from attnexp.maps.probe import Probe, attention_maps

# the per-head scores an Analysis adds to a snapshot's stat_ arrays (the rest are maps.stats')
ANALYSIS_SCORES = (*roles.SCORES, "induction", "prev_token_rep", "importance", "importance_acc")


@dataclass
class Analysis:
    scores: dict[str, np.ndarray] = field(default_factory=dict)  # (L, H) each: patterns, induction pair, importance
    roles: np.ndarray | None = None  # (L, H) role names (roles.ROLES, or "mixed")
    layer_importance: np.ndarray | None = None  # (L,): the loss change with every head of a layer silenced
    rollout: list[np.ndarray] | None = None  # per example (n, n): output position <- input token, all layers
    flow: list[np.ndarray] | None = None  # per example (n, n), as rollout
    relevance: list[dict] | None = None  # per example: pred / true class and each token's relevance to each
    skipped: dict[str, str] = field(default_factory=dict)  # method -> why it was not computed
    notes: dict[str, str] = field(default_factory=dict)  # method -> what it did with maps that are not distributions

    @property
    def heads_90(self) -> int | None:
        """How many heads carry 90% of the total importance (None without importance)."""
        imp = self.scores.get("importance")
        return None if imp is None else importance.heads_for_share(imp)

    def scalars(self) -> dict[str, float]:
        """Run-level scalars beside the per-head ones (`stats.flat(self.scores)`)."""
        out = {}
        if self.heads_90 is not None:
            out["attn/heads_90"] = float(self.heads_90)
        if self.layer_importance is not None:
            out.update({f"attn/L{i}/layer_importance": float(v) for i, v in enumerate(self.layer_importance)})
        if "induction" in self.scores:
            out["attn/induction_best"] = float(self.scores["induction"].max())
        return out

    def arrays(self) -> dict[str, np.ndarray]:
        """What a snapshot .npz keeps besides the weights and the stat_ arrays: plain arrays only."""
        out: dict[str, np.ndarray] = {}
        if self.roles is not None:
            out["roles"] = np.asarray(self.roles, dtype=str)
        if self.layer_importance is not None:
            out["layer_importance"] = self.layer_importance
        for name in ("rollout", "flow"):
            for b, m in enumerate(getattr(self, name) or []):
                out[f"{name}_ex{b}"] = m.astype(np.float32)
        for b, r in enumerate(self.relevance or []):
            out[f"relevance_pred_ex{b}"] = np.array([r["pred"]])
            out[f"relevance_pred_scores_ex{b}"] = r["pred_scores"].astype(np.float32)
            if r["true"] is not None:
                out[f"relevance_true_ex{b}"] = np.array([r["true"]])
                out[f"relevance_true_scores_ex{b}"] = r["true_scores"].astype(np.float32)
        for name in ("skipped", "notes"):
            if getattr(self, name):
                out[name] = np.array([f"{k}: {v}" for k, v in getattr(self, name).items()], dtype=str)
        return out


def analysis_from(z) -> Analysis:
    """An Analysis back from a snapshot's arrays (`Analysis.arrays`, np.load without pickle): a resumed
    run's viewer shows its earlier epochs' roles, rollout and relevance too."""
    from attnexp.maps.snapshot import STAT_PREFIX

    files = set(z.files)
    a = Analysis(scores={k[len(STAT_PREFIX):]: np.asarray(z[k], dtype=float) for k in files
                         if k.startswith(STAT_PREFIX) and k[len(STAT_PREFIX):] in ANALYSIS_SCORES})
    a.roles = np.asarray(z["roles"], dtype=str) if "roles" in files else None
    a.layer_importance = np.asarray(z["layer_importance"], dtype=float) if "layer_importance" in files else None
    for name in ("rollout", "flow"):
        found = sorted((int(k.rsplit("_ex", 1)[1]), k) for k in files if k.startswith(f"{name}_ex"))
        setattr(a, name, [np.asarray(z[k], dtype=float) for _, k in found] or None)
    preds = sorted(int(k.rsplit("_ex", 1)[1]) for k in files if k.startswith("relevance_pred_ex"))
    a.relevance = [{"pred": int(z[f"relevance_pred_ex{b}"][0]), "pred_scores": np.asarray(z[f"relevance_pred_scores_ex{b}"]),
                    "true": int(z[f"relevance_true_ex{b}"][0]) if f"relevance_true_ex{b}" in files else None,
                    "true_scores": np.asarray(z[f"relevance_true_scores_ex{b}"]) if f"relevance_true_ex{b}" in files
                    else None} for b in preds] or None
    for name in ("skipped", "notes"):
        if name in files:
            setattr(a, name, dict(str(x).split(": ", 1) for x in z[name] if ": " in str(x)))
    return a


@dataclass
class Context:
    """What the analysis needs besides the maps: whether the model is causal and what its rows are
    (the variant's `rows`), the induction input (causal models), how a classifier pools, the
    probe's labels, and `loss_of(head_mask_LH) -> (loss, acc)` on a fixed batch (importance)."""

    causal: bool
    rows: str = "1"
    induction_ids: list[int] | None = None
    classify: bool = False
    pooling: str = "cls"
    labels: list[int] | None = None
    loss_of: Callable[[torch.Tensor | None], tuple[float, float]] | None = None
    type_ids: list[list[int]] | None = None


def context_of(model, probe: Probe, first_word_id: int | None = None, loss_of=None) -> Context:
    """The Context of `model` and its probe set, for the training callback and `attnexp maps` alike:
    the induction input where the model is causal and `first_word_id` says where ordinary tokens
    start, the probe's labels (validation examples; given texts have none), and `loss_of` where
    there is a labelled batch to measure importance on (the callback's)."""
    from attnexp import attention

    causal = model.a.causal
    induction = (induction_input(probe.ids[0][0], first_word_id, model.tok_emb.num_embeddings, model.m.max_len,
                                 probe.lengths) if causal and first_word_id is not None else None)
    return Context(causal=causal, rows=attention.get(model.a.name).rows, induction_ids=induction,
                   classify=model.head_kind == "classify", pooling=model.pooling, labels=probe.labels, loss_of=loss_of,
                   type_ids=probe.types)


def induction_input(first_id: int, first_word_id: int, vocab_size: int, max_len: int, lengths: list[int] | None = None,
                    n: int = 50) -> list[int] | None:
    """The repeated random sequence (roles.induction_probe) that fits the model: at most n distinct
    tokens, and no longer than the model's context or (given the probe's `lengths`) than the
    examples it sees, whose positions it was trained on. None when fewer than 4 tokens would repeat."""
    n = min(n, (max_len - 1) // 2, vocab_size - first_word_id)
    if lengths:
        n = min(n, (int(np.median(lengths)) - 1) // 2)
    return roles.induction_probe(first_id, first_word_id, vocab_size, n) if n >= 4 else None


def analyse(model, probe: Probe, w: np.ndarray, pad_id: int, cfg: MapsConfig, ctx: Context) -> Analysis:
    """Every method `cfg` turns on, for the maps `w` (L, B, H, T, T) of `probe` through `model`."""
    a = Analysis()
    if cfg.roles:
        a.scores.update(roles.pattern_scores(w, probe.lengths, probe.tokens, ctx.causal))
        if ctx.causal and ctx.induction_ids:
            ids, ctl = ctx.induction_ids, roles.induction_control(ctx.induction_ids)
            both = attention_maps(model, Probe([ids, ctl], [[""] * len(ids)] * 2), pad_id)  # one pass, B = 2
            a.scores.update(roles.induction_scores(both[:, :1], (len(ids) - 1) // 2, control=both[:, 1:]))
        elif ctx.causal:
            a.skipped["induction"] = ("the vocabulary, model.max_len or the examples are too short for a repeated random "
                                      "sequence of 4 tokens")
        a.roles = roles.assign(a.scores)
    if cfg.importance:
        if ctx.loss_of is None:
            a.skipped["importance"] = "no labelled batch to measure the loss on (maps of given texts only)"
        else:
            L, H = w.shape[0], w.shape[2]
            imp = importance.head_importance(ctx.loss_of, L, H)
            a.scores["importance"], a.scores["importance_acc"] = imp["importance"], imp["importance_acc"]
            a.layer_importance = imp["layer_importance"]
    if cfg.rollout or cfg.flow:
        _rollout_and_flow(a, w, probe, cfg, ctx)
    if cfg.relevance:
        if not ctx.classify:
            a.skipped["relevance"] = "it explains a class's logit, so it needs a classifier (task=classify)"
        else:
            a.relevance = relevance(model, probe, pad_id, ctx)
            if ctx.rows == "signed":
                a.notes["relevance"] = ("gradient x attention takes the signed maps as they were applied and keeps the "
                                        "positive part of each product, as its authors do")
    return a


def _rollout_and_flow(a: Analysis, w: np.ndarray, probe: Probe, cfg: MapsConfig, ctx: Context) -> None:
    """Rollout and flow need each row to say where the mass went: signed rows are refused, rows that
    are not distributions enter as their shares (explain module docstring)."""
    wanted = [m for m in ("rollout", "flow") if getattr(cfg, m)]
    if ctx.rows == "signed":
        for m in wanted:
            a.skipped[m] = ("this variant's maps are signed (a difference of two softmaxes): a negative weight is no "
                            "flow, and no rescaling makes one")
        return
    if ctx.rows != "1":
        for m in wanted:
            a.notes[m] = (f"rows here sum to {ctx.rows}, not 1: {m} uses each row's shares (where its mass went, not "
                          f"how much)")
    per_example = [w[:, b, :, :n, :n] for b, n in enumerate(probe.lengths)]
    try:
        if cfg.rollout:
            a.rollout = [explain.rollout(m) for m in per_example]
        if cfg.flow:
            a.flow = [explain.flow(m) for m in per_example]
    except explain.Unsupported as e:
        for m in wanted:
            a.skipped[m] = str(e)


def relevance(model, probe: Probe, pad_id: int, ctx: Context) -> list[dict]:
    """Per probe example: the predicted class (and the true one, where the probe has labels) and
    each token's relevance to it (explain.gradient_relevance)."""
    from attnexp.data.collate import pad

    device = next(model.parameters()).device
    with torch.inference_mode(False):  # Lightning validates under inference_mode: these tensors need autograd
        ids, pad_mask = probe.batch(pad_id, device)
        types = None if ctx.type_ids is None else pad(ctx.type_ids, 0)[0].to(device)
    pred, pred_scores = explain.gradient_relevance(model, ids, pad_mask, None, ctx.pooling, types)  # None: the predicted
    out = [{"pred": int(p), "pred_scores": s, "true": None, "true_scores": None} for p, s in zip(pred, pred_scores)]
    if ctx.labels is not None:
        true = torch.tensor(ctx.labels, device=device)
        for o, y, s in zip(out, ctx.labels, explain.gradient_relevance(model, ids, pad_mask, true, ctx.pooling, types)[1]):
            o["true"], o["true_scores"] = int(y), s
    return out
