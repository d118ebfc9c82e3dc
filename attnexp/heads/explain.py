"""Attention that explains: token-to-token relevance through all layers, and which input tokens
drove a classifier's prediction.

- `rollout` (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers"): each layer's
  maps averaged over heads, the residual added as 0.5 A + 0.5 I, rows renormalised, multiplied
  from the first layer up: how much each output position draws on each input token.
- `flow` (the same paper): the maximum flow from each input token to an output position through
  the layered graph whose edge capacities are those residual-augmented maps, each output row then
  normalised to sum 1 as the authors' code does (a row's raw flows sum to about n). Capacities are
  rounded to steps of 1e-6 (scipy's solver takes integers), so each flow is within about
  (edges in its minimum cut) x 5e-7 of the real-valued one; costly (a max-flow problem per pair of
  tokens), so it is opt-in: maps.flow=true.
- `gradient_relevance` (Chefer et al. 2021b, "Generic Attention-model Explainability for
  Interpreting Bi-Modal and Encoder-Decoder Transformers", ICCV: the gradient x attention rule
  that simplifies their relevance propagation of Chefer et al. 2021a): R = I, then for each layer
  R += mean_h((dy/dA * A)^+) R, with y the logit of a class; the rows the classifier reads (its
  pooling) give each input token's relevance to that class, less the identity the rule starts
  from (a token is not relevant merely for being the one the pooling reads: the authors drop the
  [CLS] column for the same reason).

What each does with maps that are not distributions (`Attention.rows`): rollout and flow need
where a row's mass goes, so rows that sum to at most 1 or to anything non-negative (sink,
softpick, sigmoid) enter as their shares (w / row sum: where mass went, not how much), and signed
maps (differential) are refused: a negative weight is no flow. The gradient rule uses each map as
it was applied, signed or not, keeping the positive part of gradient x weight, as its authors do.
"""

from __future__ import annotations

import numpy as np
import torch

from attnexp.heads.stats import shares


class Unsupported(ValueError):
    """A method that cannot give an honest answer for these maps, with the reason."""


def residual_maps(w_LHnn: np.ndarray) -> np.ndarray:
    """(L, n, n): per layer, the heads' mean map as shares, with the residual (0.5 A + 0.5 I), rows renormalised."""
    if np.nanmin(w_LHnn) < -1e-6:
        raise Unsupported("rollout and flow need non-negative maps; these are signed (a difference of maps): a "
                          "negative weight is no flow")
    a = shares(w_LHnn).mean(1)
    a = 0.5 * a + 0.5 * np.eye(a.shape[-1])
    return a / a.sum(-1, keepdims=True)


def rollout(w_LHnn: np.ndarray) -> np.ndarray:
    """(n, n): row i, how much output position i draws on each input token, through every layer."""
    r = np.eye(w_LHnn.shape[-1])
    for a in residual_maps(w_LHnn):
        r = a @ r
    return r


SCALE = 1_000_000  # scipy's max-flow takes integer capacities: weights in steps of 1e-6


def flow(w_LHnn: np.ndarray, rows: list[int] | None = None) -> np.ndarray:
    """(len(rows), n), rows = every position by default: the max flow from each input token to each
    output position through the layered graph of the residual-augmented maps (node (l, i):
    position i after layer l; an edge from (l, k) to (l + 1, q) of capacity a_l[q, k]).
    scipy.sparse.csgraph.maximum_flow (Dinic's algorithm, in C) solves each pair; n^2 problems
    an example, so it is opt-in (maps.flow=true). Needs scipy."""
    try:
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import maximum_flow
    except ImportError as e:
        raise Unsupported("attention flow needs scipy: pip install 'attnexp[explain]' (or set maps.flow=false)") from e
    a = residual_maps(w_LHnn)
    L, n, _ = a.shape
    layer, q, k = np.nonzero(a > 0.5 / SCALE)
    caps = np.rint(a[layer, q, k] * SCALE).astype(np.int32)
    graph = csr_matrix((caps, (layer * n + k, (layer + 1) * n + q)), shape=((L + 1) * n, (L + 1) * n))
    rows = list(range(n)) if rows is None else rows
    out = np.zeros((len(rows), n))
    for r, i in enumerate(rows):
        for j in range(n):
            out[r, j] = maximum_flow(graph, j, L * n + i).flow_value / SCALE
    return out / np.maximum(out.sum(-1, keepdims=True), 1e-12)  # each row a distribution, as the authors normalise


def pooled_rows(pooling: str, n: int) -> list[int]:
    """The output positions a classifier reads: [CLS] (the first), the last real token, or all (mean)."""
    return [0] if pooling == "cls" else [n - 1] if pooling == "last" else list(range(n))


def gradient_relevance(model, ids: torch.Tensor, pad_mask: torch.Tensor, classes: torch.Tensor | None, pooling: str,
                       token_types: torch.Tensor | None = None) -> tuple[list[int], list[np.ndarray]]:
    """The classes explained (`classes`, or None: each example's predicted class, read from the same
    forward pass) and per example b, (n_b,) the relevance of each input token to logit `classes[b]`
    (Chefer et al.'s gradient x attention rule, module docstring). The model must be a classifier;
    its maps must be the tensors its output was computed from (every attnexp variant returns those)."""
    from attnexp.heads.probe import eval_mode

    frozen = [p for p in model.parameters() if not p.requires_grad]  # a frozen encoder's maps need a graph too
    try:
        for p in frozen:  # autograd.grad below fills no .grad: nothing reaches an optimizer
            p.requires_grad_(True)
        with eval_mode(model), torch.inference_mode(False), torch.enable_grad():  # Lightning validates under inference_mode
            ids, pad_mask = ids.clone(), pad_mask.clone()  # normal tensors, not inference ones
            token_types = None if token_types is None else token_types.clone()
            kw = {} if token_types is None else {"token_type_ids_BT": token_types}
            out = model(ids, pad_mask, need_weights=True, **kw)
            classes = out.logits.detach().argmax(-1) if classes is None else classes.clone()
            y = out.logits.gather(1, classes[:, None]).sum()
            grads = torch.autograd.grad(y, out.attn, allow_unused=True)
    finally:
        for p in frozen:
            p.requires_grad_(False)
    if any(g is None for g in grads):
        raise Unsupported("no gradient reaches the maps this variant returns, so gradient x attention cannot be taken")
    result = []
    for b, n in enumerate(pad_mask.sum(1).tolist()):
        r = torch.eye(n, dtype=torch.float64)
        for a, g in zip(out.attn, grads):
            cam = (g[b, :, :n, :n] * a[b, :, :n, :n]).clamp(min=0).mean(0).double().cpu()
            r = r + cam @ r
        r = r - torch.eye(n, dtype=torch.float64)  # what reached the pooled rows through attention (below)
        result.append(r[pooled_rows(pooling, n)].mean(0).detach().cpu().numpy())
    return classes.tolist(), result
