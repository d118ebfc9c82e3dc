"""A split held as tensors, so a training batch is a few tensor ops on the host, never a Python loop
over its examples: `ids` (N, T) right-padded, `lengths` (N,), and the labels the task gives per row
((N, T) or (N,)), built once. A batch is those rows, cut to the batch's longest (rounded as the
collator rounds); a masked LM's masks come from the collator's own function of (seed, epoch, rows).

The DataLoader hands the batch sampler's whole list to `__getitems__` (torch's batched fetch), so no
per-example `__getitem__` runs either. The batches equal the collator's on the same items, bitwise
(tests/unit/data/test_table.py), so a run's numbers are the same as before this path existed.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import Dataset

from attnexp.config.data import IGNORE
from attnexp.data.collate import Collator, pad


class Table(Dataset):
    def __init__(self, ids: torch.Tensor, lengths: torch.Tensor, labels: torch.Tensor | None, collator: Collator,
                 names: list[int] | None = None):
        self.ids, self.lengths, self.labels, self.collator = ids, lengths, labels, collator
        self.names = names  # each row's item `idx` (a masked LM's masks are drawn from them), else its position
        self.known = lengths.numpy()

    @classmethod
    def from_items(cls, items: list[dict], collator: Collator) -> Table:
        ids, _ = pad([it["input_ids"] for it in items], collator.pad_id)
        lengths = torch.tensor([len(it["input_ids"]) for it in items])
        kind = collator.label_kind
        labels = (torch.tensor([it["label"] for it in items]) if kind == "classify" else
                  pad([it["labels"] for it in items], IGNORE)[0] if kind == "given" else None)
        return cls(ids, lengths, labels, collator, [it.get("idx", r) for r, it in enumerate(items)])

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, key: tuple[int, int]) -> dict:
        return self.__getitems__([key])

    def __getitems__(self, keys: list[tuple[int, int]]) -> dict:
        """The batch of rows `keys` ((epoch, row) pairs from attnexp.data.base.EpochBatches)."""
        c = self.collator
        picked = np.fromiter((i for _, i in keys), dtype=np.int64, count=len(keys))
        rows = torch.from_numpy(picked)
        lengths = self.lengths[rows]
        known = self.known[picked]  # host numbers (numpy): the batch's sizes without a tensor read
        T = int(known.max())
        if c.pad_multiple > 1:
            rounded = -(-T // c.pad_multiple) * c.pad_multiple
            T = max(T, min(rounded, c.max_len)) if c.max_len else rounded
        ids = self.ids[rows, :T] if T <= self.ids.shape[1] else \
            torch.nn.functional.pad(self.ids[rows], (0, T - self.ids.shape[1]), value=c.pad_id)
        pad_mask = torch.arange(T)[None, :] < lengths[:, None]
        batch = {"input_ids": ids, "pad_mask": pad_mask, "padded": int(known.min()) < T, "n_tokens": int(known.sum())}
        if c.label_kind == "classify":
            batch["labels"] = self.labels[rows]
        elif c.label_kind == "given":
            given = self.labels[rows, :T] if T <= self.labels.shape[1] else \
                torch.nn.functional.pad(self.labels[rows], (0, T - self.labels.shape[1]), value=IGNORE)
            batch["labels"] = given
        elif c.label_kind == "next":
            labels = torch.full_like(ids, IGNORE)
            labels[:, :-1] = ids[:, 1:].masked_fill(~pad_mask[:, 1:], IGNORE)
            batch["labels"] = labels
        else:  # masked
            epoch = keys[0][0] if c.per_epoch else 0
            names = tuple(self.names[i] if self.names else i for _, i in keys)
            batch["input_ids"], batch["labels"] = c.masks(ids, pad_mask, epoch, names)
        return batch


def whole_batch(batch: dict) -> dict:
    """The DataLoader's collate_fn: `Table.__getitems__` already made the batch (module level, so a
    worker process can pickle it)."""
    return batch
