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
from attnexp.data.collate import Collator, next_labels, pad, padded_length


class Table(Dataset):
    """`ids` (N, W) and per-row `labels` are padded to W = the padded length of the longest row, so any
    batch of them is a slice; `lengths` (N,) are host numbers (numpy): the batch's sizes are known
    without a tensor read."""

    def __init__(self, ids: torch.Tensor, lengths: np.ndarray, labels: torch.Tensor | None, collator: Collator,
                 names: list[int] | None = None):
        self.ids, self.lengths, self.labels, self.collator = ids, np.asarray(lengths, dtype=np.int64), labels, collator
        # The rows are gathered through numpy views of the same memory: torch's index kernel runs on its
        # intra-op threads, which spin for a ~10 us copy (at 2 threads a batch cost twice the CPU of 1, and
        # far more beside a busy core); numpy's gather is one thread and about 2x faster even then.
        self._ids, self._labels = ids.numpy(), None if labels is None else labels.numpy()
        self.names = names  # each row's item `idx` (a masked LM's masks are drawn from them), else its position

    @classmethod
    def from_items(cls, items: list[dict], collator: Collator) -> Table:
        c, kind = collator, collator.label_kind
        ids, _ = pad([it["input_ids"] for it in items], c.pad_id, c.pad_multiple, c.max_len)
        labels = (torch.tensor([it["label"] for it in items]) if kind == "classify" else
                  pad([it["labels"] for it in items], IGNORE)[0] if kind == "given" else None)
        if labels is not None and labels.dim() == 2 and labels.shape[1] < ids.shape[1]:  # to the ids' padded width
            labels = torch.nn.functional.pad(labels, (0, ids.shape[1] - labels.shape[1]), value=IGNORE)
        lengths = np.fromiter((len(it["input_ids"]) for it in items), dtype=np.int64, count=len(items))
        return cls(ids, lengths, labels, collator, [it.get("idx", r) for r, it in enumerate(items)])

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, key: tuple[int, int]) -> dict:
        return self.__getitems__([key])

    def __getitems__(self, keys: list[tuple[int, int]]) -> dict:
        """The batch of rows `keys` ((epoch, row) pairs from attnexp.data.base.EpochBatches)."""
        c = self.collator
        picked = np.fromiter((i for _, i in keys), dtype=np.int64, count=len(keys))
        known = self.lengths[picked]
        T = padded_length(int(known.max()), c.pad_multiple, c.max_len)  # <= the table's width: a slice
        ids = torch.from_numpy(self._ids[picked, :T])
        pad_mask = torch.arange(T)[None, :] < torch.from_numpy(known)[:, None]
        batch = {"input_ids": ids, "pad_mask": pad_mask, "padded": int(known.min()) < T, "n_tokens": int(known.sum())}
        if c.label_kind == "classify":
            batch["labels"] = torch.from_numpy(self._labels[picked])
        elif c.label_kind == "given":
            batch["labels"] = torch.from_numpy(self._labels[picked, :T])
        elif c.label_kind == "next":
            batch["labels"] = next_labels(ids, pad_mask)
        else:  # masked
            epoch = keys[0][0] if c.per_epoch else 0
            names = tuple(self.names[i] if self.names else i for _, i in keys)
            batch["input_ids"], batch["labels"] = c.masks(ids, pad_mask, epoch, names)
        return batch


def whole_batch(batch: dict) -> dict:
    """The DataLoader's collate_fn: `Table.__getitems__` already made the batch (module level, so a
    worker process can pickle it)."""
    return batch
