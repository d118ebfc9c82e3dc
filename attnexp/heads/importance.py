"""Which heads the model needs: the change in loss (and accuracy) on a fixed batch when one head
alone is silenced (its output zeroed before the output projection: the model's `head_mask_LH`),
and when a whole layer's heads are (Michel et al. 2019, "Are Sixteen Heads Really Better than
One?", who found most heads removable). `heads_for_share` says how many heads carry 90% of the
total importance: how many the model actually uses. Only `head_importance` needs torch, so the
report (`attnexp compare report=`, which reads JSON and .npz only) imports this module without it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

SHARE = 0.9  # "the heads carrying 90% of the importance"


def head_importance(loss_of: Callable[[torch.Tensor | None], tuple[float, float]], L: int, H: int) -> dict[str, np.ndarray]:
    """`loss_of(head_mask_LH)` -> (loss, accuracy) of the model on one fixed batch (None: no mask).
    Returns (L, H) `importance` (loss with the head silenced minus the loss without) and
    `importance_acc` (the accuracy lost), and (L,) `layer_importance` (every head of the layer
    silenced). L*H + L + 1 forward passes, no backward."""
    import torch

    base_loss, base_acc = loss_of(None)
    imp, imp_acc, layer = np.zeros((L, H)), np.zeros((L, H)), np.zeros(L)
    for li in range(L):
        for h in range(H):
            mask = torch.ones(L, H)
            mask[li, h] = 0
            loss, acc = loss_of(mask)
            imp[li, h], imp_acc[li, h] = loss - base_loss, base_acc - acc
        mask = torch.ones(L, H)
        mask[li] = 0
        layer[li] = loss_of(mask)[0] - base_loss
    return {"importance": imp, "importance_acc": imp_acc, "layer_importance": layer}


def heads_for_share(importance: np.ndarray, share: float = SHARE) -> int:
    """How many heads, most important first, carry `share` of the total positive importance (0 when
    no head's silencing costs anything)."""
    values = np.sort(np.clip(np.asarray(importance, dtype=float).ravel(), 0, None))[::-1]
    total = values.sum()
    if total <= 0:
        return 0
    return int(np.searchsorted(np.cumsum(values), share * total - 1e-12) + 1)
