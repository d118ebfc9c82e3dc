"""What the heads do and which matter, for one snapshot of the probe set's maps: each head's
pattern scores and role (`roles`), the induction pair on a repeated random sequence (causal
models), each head's and layer's importance on a fixed batch (`importance`), attention rollout
and flow (`explain`), and, for a classifier, each token's relevance to the predicted and the true
class. The training callback and `attnexp maps` both call `analyse`; a method that cannot answer
honestly for these maps is left out and says why (`Analysis.skipped`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from attnexp.config import MapsConfig
from attnexp.data.collate import pad
from attnexp.heads import explain, importance, quantities, roles
from attnexp.heads.probe import Probe, attention_maps
from attnexp.heads.record import Analysis


@dataclass
class Context:
    """What the analysis needs besides the maps: whether the model is causal and what its rows are
    (the variant's `rows`), the induction input (causal models), how a classifier pools, the
    probe's labels, and `loss_of(head_mask_LH) -> (loss, acc)` on a fixed batch (importance)."""

    causal: bool
    rows: str = "1"
    induction_ids: list[int] | None = None
    # roles.induction_controls of induction_ids: CONTROL_DRAWS control sequences (one flat list: one draw)
    induction_control_ids: list[list[int]] | list[int] | None = None
    classify: bool = False
    pooling: str = "cls"
    labels: list[int] | None = None
    loss_of: Callable[[torch.Tensor | None], tuple[float, float]] | None = None
    type_ids: list[list[int]] | None = None


def context_of(model, probe: Probe, first_word_id: int | None = None, loss_of=None,
               pool: list[int] | None = None) -> Context:
    """The Context of `model` and its probe set, for the training callback and `attnexp maps` alike:
    the induction input where the model is causal and `first_word_id` says where ordinary tokens
    start, the probe's labels (validation examples; given texts have none), and `loss_of` where
    there is a labelled batch to measure importance on (the callback's). `pool`: the tokens the
    induction input draws from (the training data's frequent ones, where the data is at hand)."""
    from attnexp import attention

    causal = model.causal
    V = model.tok_emb.num_embeddings
    induction = (induction_input(probe.ids[0][0], first_word_id, V, model.max_len, probe.lengths, pool=pool)
                 if causal and first_word_id is not None else None)
    control = roles.induction_controls(induction, first_word_id, V, pool=pool) if induction else None
    return Context(causal=causal, rows=attention.get(model.attention_name).rows, induction_ids=induction,
                   induction_control_ids=control,
                   classify=model.head_kind == "classify", pooling=model.pooling, labels=probe.labels, loss_of=loss_of,
                   type_ids=probe.types)


def induction_input(first_id: int, first_word_id: int, vocab_size: int, max_len: int, lengths: list[int] | None = None,
                    n: int = 50, pool: list[int] | None = None) -> list[int] | None:
    """The repeated random sequence (roles.induction_probe) that fits the model: at most n distinct
    tokens, and no longer than the model's context or (given the probe's `lengths`) than the
    examples it sees, whose positions it was trained on. None when fewer than 4 tokens would repeat."""
    n = min(n, (max_len - 1) // 2, len(roles.token_pool(first_word_id, vocab_size, pool)))
    if lengths:
        n = min(n, (int(np.median(lengths)) - 1) // 2)
    return roles.induction_probe(first_id, first_word_id, vocab_size, n, pool=pool) if n >= 4 else None


def read_heads(model, probe: Probe, w: np.ndarray, pad_id: int, cfg: MapsConfig, ctx: Context,
               start: np.ndarray | None = None, pair_maps: np.ndarray | None = None) -> Analysis:
    """The analysis of the heads of `model` on `probe`, whose maps are `w` (L, B, H, T, T): every
    declared per-head quantity (heads.quantities: the maps' own statistics, drift from `start`
    where given, the pattern and induction scores, importance) by name as (layers, heads) in
    `.scores`, with roles, layer importance, rollout / flow and relevance. The snapshot saves it,
    the viewer shows it, the training callback logs it, `attnexp maps` draws it and the notebook
    returns it: nothing else merges per-head values. `pair_maps`: the induction pair's maps where the
    caller took them already (probe.light_reading), else taken here."""
    a = analyse(model, probe, w, pad_id, cfg, ctx, pair_maps)
    a.scores = {**quantities.measure(quantities.Maps(w, probe.lengths, start, probe.targets)), **a.scores}
    return a


def analyse(model, probe: Probe, w: np.ndarray, pad_id: int, cfg: MapsConfig, ctx: Context,
            pair_maps: np.ndarray | None = None) -> Analysis:
    """Every method `cfg` turns on, for the maps `w` (L, B, H, T, T) of `probe` through `model`."""
    a = Analysis()
    if cfg.roles:
        a.scores.update(pattern_scores(model, probe, w, pad_id, ctx, pair_maps))
        if ctx.causal and not ctx.induction_ids:
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
    # relevance explains a class's logit: a language model never has it, and its viewer does not warn
    # that it is missing (every LM run's viewer showed an orange "not computed: relevance" before)
    if cfg.relevance and ctx.classify:
        a.relevance = relevance(model, probe, pad_id, ctx)
        if ctx.rows == "signed":
            a.notes["relevance"] = ("gradient x attention takes the signed maps as they were applied and keeps the "
                                    "positive part of each product, as its authors do")
    return a


def pattern_scores(model, probe: Probe, w: np.ndarray, pad_id: int, ctx: Context,
                   pair_maps: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Each head's pattern scores on the maps `w` of `probe` (heads.roles), and on a causal model the
    induction score on the repeated random sequence against its controls (one more pass, B = 1 + the
    control draws): the scores roles are assigned from, at every snapshot and every light reading."""
    out = roles.pattern_scores(w, probe.lengths, probe.tokens, ctx.causal)
    if ctx.causal and ctx.induction_ids:
        if not ctx.induction_control_ids:  # no silent skip: the score without its control is not the score
            raise ValueError("Context.induction_ids needs its induction_control_ids (analysis.context_of builds both)")
        ids, ctls = ctx.induction_ids, induction_pair(ctx)[1:]
        both = pair_maps if pair_maps is not None else \
            attention_maps(model, Probe([ids, *ctls], [[""] * len(ids)] * (1 + len(ctls))), pad_id)
        out.update(roles.induction_scores(both[:, :1], (len(ids) - 1) // 2, control=both[:, 1:]))
    return out


def induction_pair(ctx: Context) -> list[list[int]] | None:
    """[the repeated sequence, *its controls]: what the induction pass takes (None where there is none)."""
    if not (ctx.causal and ctx.induction_ids and ctx.induction_control_ids):
        return None
    ctl = ctx.induction_control_ids
    return [ctx.induction_ids, *([ctl] if isinstance(ctl[0], int) else ctl)]


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
