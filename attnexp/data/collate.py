"""Batches: right padding, a boolean pad mask, and labels of the kind the task needs.

Items are dicts with `input_ids` (list[int]), `idx`, and optionally `label` (classification) or
`labels` (per-token targets already given, e.g. the synthetic tasks; -100 = no loss).
Output: input_ids (B, T), pad_mask (B, T) True at real tokens, labels (B, T) or (B,), and
`padded` (a Python bool: does any sequence of the batch have padding) and `n_tokens` (a Python int:
the real tokens), known here for free where the training step would need a device sync.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnexp.config.data import IGNORE  # label of positions without a target


def padded_length(T: int, multiple: int = 1, cap: int | None = None) -> int:
    """A batch's length: its longest sequence `T` rounded up to a multiple of `multiple` (at most `cap`,
    never below T): compiled kernels then see few distinct shapes. Monotonic in T."""
    if multiple <= 1:
        return T
    rounded = -(-T // multiple) * multiple
    return max(T, min(rounded, cap)) if cap else rounded


def next_labels(ids: torch.Tensor, pad_mask: torch.Tensor) -> torch.Tensor:
    """A causal LM's targets: each position's next token, IGNORE at the last and past each end."""
    labels = torch.full_like(ids, IGNORE)
    labels[:, :-1] = ids[:, 1:].masked_fill(~pad_mask[:, 1:], IGNORE)
    return labels


def pad(seqs: list[list[int]], pad_id: int, multiple: int = 1, cap: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad token lists to (B, T) ids and a (B, T) bool mask, True at real tokens; T is
    `padded_length` of the longest."""
    lengths = [len(s) for s in seqs]
    T = padded_length(max(lengths), multiple, cap)
    ids = torch.tensor([list(s) + [pad_id] * (T - len(s)) for s in seqs], dtype=torch.long)  # one call, not one per row
    return ids, torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]


@dataclass
class Collator:
    label_kind: str  # next (the next token) | masked (masked tokens) | classify (the item's label) | given (the item's own)
    pad_id: int
    mask_id: int
    vocab_size: int
    first_word_id: int  # ids below this are special tokens, never masked or sampled
    mask_prob: float = 0.15
    seed: int = 0  # masking is a function of (seed, epoch, the batch's items): resumed runs mask alike
    pad_multiple: int = 1  # batch lengths rounded up to a multiple of this (FlexAttention: 128) ...
    max_len: int | None = None  # ... but not beyond the longest sequence the model takes
    per_epoch: bool = True  # training: new masks every epoch; validation/test: the same masks every epoch

    def __call__(self, items: list[dict]) -> dict:
        lengths = [len(it["input_ids"]) for it in items]
        ids, pad_mask = pad([it["input_ids"] for it in items], self.pad_id, self.pad_multiple, self.max_len)
        # Known here on the CPU for free; the model would need a device sync to find out.
        batch = {"input_ids": ids, "pad_mask": pad_mask, "padded": min(lengths) < ids.shape[1], "n_tokens": sum(lengths)}
        if self.label_kind == "classify":
            batch["labels"] = torch.tensor([it["label"] for it in items])
        elif self.label_kind == "next":
            batch["labels"] = next_labels(ids, pad_mask)
        elif self.label_kind == "masked":
            batch["input_ids"], batch["labels"] = self.mask_tokens(ids, pad_mask, items)
        elif self.label_kind == "given":
            labels = torch.full_like(ids, IGNORE)
            for b, it in enumerate(items):
                labels[b, : lengths[b]] = torch.as_tensor(it["labels"])
            batch["labels"] = labels
        else:
            raise ValueError(f"Unknown label kind {self.label_kind!r}")
        return batch

    def mask_tokens(self, ids, pad_mask, items):
        epoch = items[0].get("epoch", 0) if self.per_epoch else 0
        return self.masks(ids, pad_mask, epoch, tuple(it["idx"] for it in items))

    def masks(self, ids, pad_mask, epoch: int, rows: tuple[int, ...]):
        """BERT's recipe: pick mask_prob of the real word tokens (at least one per sequence);
        of those 80% -> [MASK], 10% -> a random word, 10% unchanged. Labels only at picks."""
        key = hash((self.seed, epoch, rows))  # ints and tuples hash alike in every process
        g = torch.Generator().manual_seed(key % 2**63)
        candidate = pad_mask & (ids >= self.first_word_id)
        u = torch.rand(ids.shape, generator=g)
        picked = candidate & (u < self.mask_prob)
        # Guarantee one target per sequence that has any candidate (its lowest-u one).
        best = u.masked_fill(~candidate, 2.0).argmin(1)
        has = candidate.any(1)
        picked[has, best[has]] = True
        labels = ids.masked_fill(~picked, IGNORE)
        r = torch.rand(ids.shape, generator=g)
        inputs = ids.clone()
        inputs[picked & (r < 0.8)] = self.mask_id
        rand_pos = picked & (r >= 0.8) & (r < 0.9)
        inputs[rand_pos] = torch.randint(self.first_word_id, self.vocab_size, ids.shape, generator=g)[rand_pos]
        return inputs, labels
