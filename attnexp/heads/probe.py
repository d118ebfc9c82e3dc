"""The probe pass: attention weights of every layer and head, from the model's current weights,
through the weight-returning (eager) path of the very modules that train on SDPA/flash/flex."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import torch

from attnexp.data.collate import pad


@dataclass
class Probe:
    ids: list[list[int]]
    tokens: list[list[str]]
    targets: list[list[tuple[int, int]]] = field(default_factory=list)  # (query, key) the task requires
    types: list[list[int]] | None = None  # token types (BERT's segment A = 0 / B = 1) of a text pair
    labels: list[int] | None = None  # a classifier's true classes (validation examples; not given texts)

    @property
    def lengths(self) -> list[int]:
        return [len(x) for x in self.ids]

    def batch(self, pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
        ids, pad_mask = pad(self.ids, pad_id)
        return ids.to(device), pad_mask.to(device)


def probe_from(dm, texts: list[str], n_examples: int, split: str = "val") -> Probe:
    """The given texts, or the first examples of `split` (their task targets too, if any)."""
    if texts:
        ids = [dm.encode_text(t) for t in texts]
        return Probe(ids, [dm.decode(x) for x in ids])
    items = dm.splits[split][:n_examples]
    ids = [list(it["input_ids"]) for it in items]
    targets = [list(map(tuple, it.get("align", []))) for it in items] if any("align" in it for it in items) else []
    labels = [int(it["label"]) for it in items] if dm.task.name == "classify" else None
    return Probe(ids, [dm.decode(x) for x in ids], targets, labels=labels)


@contextmanager
def eval_mode(model) -> Iterator[None]:
    """The model in eval mode for a pass, then every submodule back in the mode it was in: a frozen
    encoder stays in eval mode under a training head (`model.train(was)` would switch it back on)."""
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        yield
    finally:
        for m, mode in modes:
            m.training = mode


def _pass(model, probe: Probe, pad_id: int):
    """The probe batch through the model's weight-returning path: (output, ids, pad_mask)."""
    with eval_mode(model):
        device = next(model.parameters()).device
        ids, pad_mask = probe.batch(pad_id, device)
        types = None if probe.types is None else pad(probe.types, 0)[0].to(device)
        out = model(ids, pad_mask, need_weights=True, **({} if types is None else {"token_type_ids_BT": types}))
    return out, ids, pad_mask


def _maps(out, pad_mask) -> np.ndarray:
    w = torch.stack(out.attn).float()  # (L, B, H, T, T)
    return (w * pad_mask[None, :, None, :, None] * pad_mask[None, :, None, None, :]).cpu().numpy()


@torch.no_grad()
def attention_maps(model, probe: Probe, pad_id: int) -> np.ndarray:
    """(L, B, H, T, T) float32: post-softmax weights; zero rows/cols beyond each example's length."""
    out, _, pad_mask = _pass(model, probe, pad_id)
    return _maps(out, pad_mask)


@torch.no_grad()
def maps_and_token_loss(model, probe: Probe, pad_id: int) -> tuple[np.ndarray, np.ndarray | None]:
    """One pass: the maps as `attention_maps` gives them, and for a causal language model each
    position's next-token loss (B, T-1) (positions past an example's end are 0), else None."""
    import torch.nn.functional as F

    out, ids, pad_mask = _pass(model, probe, pad_id)
    loss = None
    if model.head_kind == "lm" and model.causal:
        loss = F.cross_entropy(out.logits[:, :-1].float().transpose(1, 2), ids[:, 1:], reduction="none") * pad_mask[:, 1:]
        loss = loss.cpu().numpy()
    return _maps(out, pad_mask), loss
