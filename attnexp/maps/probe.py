"""The probe pass: attention weights of every layer and head, from the model's current weights,
through the weight-returning (eager) path of the very modules that train on SDPA/flash/flex."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch


@dataclass
class Probe:
    ids: list[list[int]]
    tokens: list[list[str]]
    targets: list[list[tuple[int, int]]] = field(default_factory=list)  # (query, key) the task requires

    @property
    def lengths(self) -> list[int]:
        return [len(x) for x in self.ids]

    def batch(self, pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
        T = max(self.lengths)
        ids = torch.full((len(self.ids), T), pad_id, dtype=torch.long)
        for b, x in enumerate(self.ids):
            ids[b, : len(x)] = torch.tensor(x)
        pad = torch.arange(T)[None] < torch.tensor(self.lengths)[:, None]
        return ids.to(device), pad.to(device)


def probe_from(dm, texts: list[str], n_examples: int) -> Probe:
    """The given texts, or the first validation examples (their task targets too, if any)."""
    if texts:
        ids = [dm.encode_text(t) for t in texts]
        return Probe(ids, [dm.decode(x) for x in ids])
    items = dm.splits["val"][:n_examples]
    ids = [list(it["input_ids"]) for it in items]
    targets = [list(map(tuple, it["align"])) for it in items] if items and "align" in items[0] else []
    return Probe(ids, [dm.decode(x) for x in ids], targets)


@torch.no_grad()
def attention_maps(model, probe: Probe, pad_id: int) -> np.ndarray:
    """(L, B, H, T, T) float32: post-softmax weights; zero rows/cols beyond each example's length."""
    was_training = model.training
    model.eval()
    try:
        device = next(model.parameters()).device
        ids, pad = probe.batch(pad_id, device)
        out = model(ids, pad, need_weights=True)
    finally:
        model.train(was_training)
    w = torch.stack(out.attn).float()  # (L, B, H, T, T)
    w = w * pad[None, :, None, :, None] * pad[None, :, None, None, :]
    return w.cpu().numpy()


def save_npz(path, w: np.ndarray, probe: Probe, head_stats: dict, **extra) -> None:
    """One layout for every maps file (the callback's epochNNN.npz and `attnexp maps`' maps.npz):
    fp16 weights (L, B, H, T, T), tokens and lengths per example, stat_<name> (L, H), extras."""
    np.savez_compressed(path, weights=w.astype(np.float16), lengths=np.array(probe.lengths),
                        tokens=np.array([np.array(t, dtype=object) for t in probe.tokens], dtype=object),
                        **{f"stat_{k}": v for k, v in head_stats.items()}, **extra)
