from __future__ import annotations

import random

import lightning as L
import torch
from torch.utils.data import DataLoader, Sampler

from attnexp.config import TaskConfig
from attnexp.data.collate import Collator


class LengthBuckets(Sampler[list[int]]):
    """Batches of similar length: shuffle, cut into pools of `pool` batches, sort each pool by
    length, cut into batches, shuffle the batches. Short posts are not padded to the longest
    post of the data set, and the order still changes every epoch."""

    def __init__(self, lengths: list[int], batch_size: int, shuffle: bool, seed: int, pool: int = 50):
        self.lengths, self.batch_size, self.shuffle, self.seed, self.pool = lengths, batch_size, shuffle, seed, pool
        self.epoch = 0

    def __iter__(self):
        rng = random.Random(self.seed + self.epoch)
        self.epoch += 1
        idx = list(range(len(self.lengths)))
        if self.shuffle:
            rng.shuffle(idx)
        span = self.batch_size * self.pool
        batches = []
        for s in range(0, len(idx), span):
            chunk = sorted(idx[s: s + span], key=self.lengths.__getitem__)
            batches += [chunk[i: i + self.batch_size] for i in range(0, len(chunk), self.batch_size)]
        if self.shuffle:
            rng.shuffle(batches)
        return iter(batches)

    def __len__(self):
        return -(-len(self.lengths) // self.batch_size)


class TokenDataModule(L.LightningDataModule):
    """Shared by every data set: lists of token-id items in, padded batches out.

    Subclasses fill `self.splits` ({"train": [...], "val": [...], maybe "test": [...]}) in setup()
    and set `vocab_size`, `num_classes`, `pad_id`, `mask_id`, `first_word_id` and `encoder`.
    """

    def __init__(self, cfg, task: TaskConfig, causal: bool):
        super().__init__()
        self.cfg, self.task, self.causal = cfg, task, causal
        self.splits: dict[str, list[dict]] = {}
        self.num_classes: int | None = None

    @property
    def objective(self) -> str:
        return "classify" if self.task.name == "classify" else self.task.objective

    def collator(self, fixed_seed: int | None) -> Collator:
        return Collator(self.objective, self.pad_id, self.mask_id, self.vocab_size, self.first_word_id,
                        self.task.mask_prob, fixed_seed)

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        items, cfg = self.splits[split], self.cfg
        kw = dict(collate_fn=self.collator(None if shuffle else cfg.seed), num_workers=cfg.num_workers,
                  persistent_workers=cfg.num_workers > 0, pin_memory=torch.cuda.is_available())
        if getattr(cfg, "bucket", False):
            lengths = [len(it["input_ids"]) for it in items]
            return DataLoader(items, batch_sampler=LengthBuckets(lengths, cfg.batch_size, shuffle, cfg.seed), **kw)
        return DataLoader(items, batch_size=cfg.batch_size, shuffle=shuffle, **kw)

    def train_dataloader(self):
        return self._loader("train", shuffle=True)

    def val_dataloader(self):
        return self._loader("val", shuffle=False)

    def test_dataloader(self):
        return self._loader("test" if "test" in self.splits else "val", shuffle=False)

    # `self.encoder` (attnexp.data.encoder.TextEncoder) is set by each subclass's setup().
    def decode(self, ids) -> list[str]:
        return self.encoder.decode(ids)

    def encode_text(self, text: str) -> list[int]:
        return self.encoder.encode(text)

    def state_dict(self) -> dict:
        """Saved by Lightning into every checkpoint: the encoder, so maps of new text need no data."""
        return {"encoder": self.encoder.state()} if getattr(self, "encoder", None) else {}

    def load_state_dict(self, state: dict) -> None:
        pass  # the encoder is rebuilt by setup() from the same data; the saved copy is for `attnexp maps`
