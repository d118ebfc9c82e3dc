"""The probe pass: attention weights of every layer and head, from the model's current weights,
through the weight-returning (eager) path of the very modules that train on SDPA/flash/flex."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

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


def plain_probe(dm, texts: list[str], n_examples: int) -> tuple[Probe | None, bool]:
    """(a language model's plain held-out windows, as many as the probe has, or None; whether the probe
    itself is plain). data=text: the validation windows before any repeat was planted; with nothing
    planted they are the probe's own, and its score is the plain one."""
    if texts or getattr(dm, "plain_val", None) is None:
        return None, False
    if dm.cfg.repeat_fraction <= 0:
        return None, True
    ids = dm.plain_probe_ids(n_examples)
    return Probe(ids, [dm.decode(x) for x in ids]), False


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
    return _masked(out, pad_mask).cpu().numpy()


def _masked(out, pad_mask) -> torch.Tensor:
    w = torch.stack(out.attn).float()  # (L, B, H, T, T), on the model's device
    return w * pad_mask[None, :, None, :, None] * pad_mask[None, :, None, None, :]


def _token_loss(model, out, ids, pad_mask) -> torch.Tensor | None:
    """A causal language model's next-token loss at each position (B, T-1), 0 past an example's end."""
    if model.head_kind != "lm" or not model.causal:
        return None
    return F.cross_entropy(out.logits[:, :-1].float().transpose(1, 2), ids[:, 1:], reduction="none") * pad_mask[:, 1:]


@torch.no_grad()
def light_reading(model, probe: Probe, pad_id: int, pair: list[list[int]] | None, step_loss: torch.Tensor | None,
                  plain: Probe | None = None):
    """What a light reading of the timeline takes from the device, in one transfer to the host: the
    probe's maps (as `attention_maps`), its token loss (as `maps_and_token_loss`), the maps of the
    induction pair (`pair`: the repeated sequence and its control, analysis.pattern_scores), the step's
    loss, and the token loss of `plain` (windows with nothing planted). Returns (maps, token loss or None,
    pair maps or None, loss or None, plain token loss or None), on the host."""
    out, ids, pad_mask = _pass(model, probe, pad_id)
    parts = {"w": _masked(out, pad_mask), "token": _token_loss(model, out, ids, pad_mask)}
    if plain is not None:
        o3, i3, m3 = _pass(model, plain, pad_id)
        parts["plain"] = _token_loss(model, o3, i3, m3)
    if pair:
        o2, _, m2 = _pass(model, Probe([list(x) for x in pair], [[""] * len(x) for x in pair]), pad_id)
        parts["pair"] = _masked(o2, m2)
    if step_loss is not None:
        parts["loss"] = step_loss.detach().float().reshape(1)
    kept = {k: v for k, v in parts.items() if v is not None}
    flat = torch.cat([v.reshape(-1) for v in kept.values()]).cpu().numpy()  # the one device-to-host copy
    got, at = {}, 0
    for k, v in kept.items():
        got[k], at = flat[at: at + v.numel()].reshape(tuple(v.shape)), at + v.numel()
    return (got["w"], got.get("token"), got.get("pair"), float(got["loss"][0]) if "loss" in got else None,
            got.get("plain"))


@torch.no_grad()
def attention_maps(model, probe: Probe, pad_id: int) -> np.ndarray:
    """(L, B, H, T, T) float32: post-softmax weights; zero rows/cols beyond each example's length."""
    out, _, pad_mask = _pass(model, probe, pad_id)
    return _maps(out, pad_mask)


@torch.no_grad()
def maps_and_token_loss(model, probe: Probe, pad_id: int) -> tuple[np.ndarray, np.ndarray | None]:
    """One pass: the maps as `attention_maps` gives them, and for a causal language model each
    position's next-token loss (B, T-1) (positions past an example's end are 0), else None."""
    out, ids, pad_mask = _pass(model, probe, pad_id)
    loss = _token_loss(model, out, ids, pad_mask)
    return _maps(out, pad_mask), None if loss is None else loss.cpu().numpy()
