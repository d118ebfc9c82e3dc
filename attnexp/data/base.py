from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from dataclasses import asdict

import lightning as L
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Sampler

from attnexp.compat.lightning import fit_position
from attnexp.config import TaskConfig
from attnexp.data.collate import Collator
from attnexp.data.table import Table, whole_batch


class EpochBatches(Sampler[list[int]]):
    """The batches of one epoch, a function of (seed, epoch) alone, so a resumed run sees the
    order the uninterrupted run would have seen. Shuffled (or in order); with `bucket`, batches of
    similar length: cut the shuffled order into pools of `pool` batches, sort each pool by length,
    cut into batches, shuffle the batches, so short posts are not padded to the longest post.

    `position_fn`, when a trainer is fitting, says which epoch this is and how many of its batches
    were already trained on (nonzero when a run resumes mid-epoch; they are skipped), read from
    the trainer's restored progress when the first batch is asked for: a loader with workers asks
    at `iter()`, before Lightning's `set_epoch`. Without it (a plain loop), `set_epoch` decides."""

    def __init__(self, lengths: list[int], batch_size: int, shuffle: bool, seed: int, bucket: bool = False,
                 pool: int = 50, position_fn: Callable[[], tuple[int, int] | None] | None = None):
        self.lengths, self.batch_size, self.shuffle, self.seed = lengths, batch_size, shuffle, seed
        self.bucket, self.pool, self.position_fn = bucket, pool, position_fn
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    @property
    def sampler(self) -> EpochBatches:
        """Lightning calls `set_epoch` on `loader.batch_sampler.sampler` (fabric's _set_sampler_epoch)."""
        return self

    def batches(self) -> list[list[int]]:
        rng = random.Random(self.seed * 1_000_003 + self.epoch)
        idx = list(range(len(self.lengths)))
        rank, world = self._world()
        if not self.shuffle and world > 1:  # validation under DDP: each example once, on one rank
            idx = idx[rank::world]
        if self.shuffle:
            rng.shuffle(idx)
        if not self.bucket:
            batches = [idx[i: i + self.batch_size] for i in range(0, len(idx), self.batch_size)]
        else:
            span, batches = self.batch_size * self.pool, []
            for s in range(0, len(idx), span):
                chunk = sorted(idx[s: s + span], key=self.lengths.__getitem__)
                batches += [chunk[i: i + self.batch_size] for i in range(0, len(chunk), self.batch_size)]
            if self.shuffle:
                rng.shuffle(batches)
        return self.shard(batches)

    @staticmethod
    def _world() -> tuple[int, int]:
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
        return 0, 1

    def shard(self, batches: list) -> list:
        """This process's training batches under DDP: every world-th, a few repeated so each rank
        takes the same number of steps. (Validation is sharded by example, before batching, with
        nothing repeated, so the sums reduced across ranks are exact.)"""
        rank, world = self._world()
        if world == 1 or not self.shuffle:
            return batches
        batches = batches + batches[: (-len(batches)) % world]
        return batches[rank::world]

    def __iter__(self):
        position = self.position_fn() if self.position_fn else None
        done = 0
        if position is not None:  # a whole epoch done is the previous one, before Lightning resets its counter
            self.epoch, done = position[0], position[1] % len(self)
        for batch in self.batches()[done:]:
            yield [(self.epoch, i) for i in batch]  # the Table draws a masked LM's masks from (epoch, rows)

    def __len__(self):
        rank, world = self._world()
        sharded_examples = world > 1 and not self.shuffle  # validation: this rank's examples, batched
        n = len(range(rank, len(self.lengths), world)) if sharded_examples else len(self.lengths)
        batches = -(-n // self.batch_size)
        return -(-batches // world) if world > 1 and self.shuffle else batches  # training: every world-th batch


BATCHING = ("batch_size", "num_workers", "bucket", "pad_to_multiple_of")  # how examples are batched, not which
HELD_OUT = ("n_test",)  # the test split's size: no training example changes with it, so a resume is not refused
# Where the data was read from: recorded, but compared through what was read (the split sizes and
# the tokenizer's hash), so a copy of the same files elsewhere still resumes.
LOCATION = ("source", "path", "hub_name", "corpus", "tokenizer", "cache_dir")


def trained_splits(sizes: dict | None) -> dict:
    """The split sizes a resume compares: the test split's changes no training example."""
    return {k: n for k, n in (sizes or {}).items() if k != "test"}


def identity_mismatch(saved: dict | None, now: dict) -> str | None:
    """None when two data identities name the same examples; else what differs, in a few words."""
    if not isinstance(saved, dict):
        return None  # a checkpoint from before attnexp recorded its data: nothing to compare
    diff = [f"data.{k}={v!r} (this run: {now['settings'].get(k)!r})"
            for k, v in (saved.get("settings") or {}).items() if now["settings"].get(k) != v]
    diff += [f"data.{k} (this run's data has it)" for k in now["settings"] if k not in (saved.get("settings") or {})]
    if trained_splits(saved.get("splits")) != trained_splits(now["splits"]):
        diff.append(f"split sizes {saved.get('splits')} (this run: {now['splits']})")
    if saved.get("tokenizer_sha256") != now["tokenizer_sha256"]:
        diff.append("another tokenizer (ids mean other tokens)")
    return ", ".join(diff[:4]) or None


class TokenDataModule(L.LightningDataModule):
    """Shared by every data set: lists of token-id items in, padded batches out.

    Subclasses fill `self.splits` ({"train": [...], "val": [...], maybe "test": [...]}) in setup()
    and set `vocab_size`, `num_classes`, `pad_id`, `mask_id`, `first_word_id` and `encoder`.
    """

    def __init__(self, cfg, task: TaskConfig, causal: bool, seed: int = 0):
        super().__init__()
        self.cfg, self.task, self.causal, self.seed = cfg, task, causal, seed  # seed: the run's, for the batch order
        self.splits: dict[str, list[dict]] = {}
        self._tables: dict[tuple[str, bool], Table] = {}
        self.num_classes: int | None = None
        self._class_names: list[str] | None = None  # a subclass's names for its classes, where it has them

    @property
    def class_names(self) -> list[str] | None:
        """What each class is called (the viewer's relevance view): the data's names, else 0, 1, ..."""
        if self.num_classes is None:
            return None
        return self._class_names or [str(i) for i in range(self.num_classes)]

    @property
    def label_kind(self) -> str:
        return "classify" if self.task.name == "classify" else self.task.objective

    def collator(self, per_epoch: bool) -> Collator:
        return Collator(self.label_kind, self.pad_id, self.mask_id, self.vocab_size, self.first_word_id,
                        self.task.mask_prob, seed=self.seed, per_epoch=per_epoch,
                        pad_multiple=self.cfg.pad_to_multiple_of or 1, max_len=self.cfg.max_len)

    def table(self, split: str, per_epoch: bool) -> Table:
        """The split as tensors (attnexp.data.table), built once per split and masking rule."""
        key = (split, per_epoch)
        if key not in self._tables:
            self._tables[key] = self.new_table(split, self.collator(per_epoch))
        return self._tables[key]

    def new_table(self, split: str, collator: Collator) -> Table:
        """The split's items as a Table (a data set held as one tensor builds its own)."""
        return Table.from_items(self.splits[split], collator)

    def frequent_tokens(self, min_share: float = 1e-4) -> list[int]:
        """The word tokens that make up at least `min_share` of the training tokens: what the heads'
        induction probe draws its random tokens from (a byte-level model never saw most bytes)."""
        t = self.table("train", per_epoch=True)
        real = torch.arange(t.ids.shape[1])[None, :] < torch.from_numpy(t.lengths)[:, None]
        counts = torch.bincount(t.ids[real], minlength=self.vocab_size)
        keep = counts >= max(1.0, min_share * float(counts.sum()))
        keep[: self.first_word_id] = False
        return keep.nonzero().flatten().tolist()

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        table, cfg = self.table(split, per_epoch=shuffle), self.cfg
        sampler = EpochBatches(table.lengths.tolist(), cfg.batch_size, shuffle, self.seed,
                               bucket=cfg.bucket, position_fn=self._position if shuffle else None)
        # A generator of its own: each new iterator draws a seed from it, which would otherwise come from
        # the global generator that dropout uses, and a resumed run would draw one number more or fewer.
        # Batches are tensor slices (Table.__getitems__); pinned on a GPU so Lightning's copy is non_blocking.
        return DataLoader(table, batch_sampler=sampler, collate_fn=whole_batch,
                          num_workers=cfg.num_workers, persistent_workers=cfg.num_workers > 0,
                          pin_memory=torch.cuda.is_available(), generator=torch.Generator().manual_seed(self.seed))

    def _position(self) -> tuple[int, int] | None:
        """(epoch, batches of it already trained on) of a fitting trainer: the second is nonzero only
        when a run resumes mid-epoch (Lightning restores its progress and expects the rest of the epoch)."""
        t = self.trainer
        if t is None or not t.training:
            return None
        return fit_position(t)

    def train_dataloader(self):
        # trainer.overfit_batches (debug=overfit): the same batches every epoch
        return self._loader("train", shuffle=not (self.trainer is not None and self.trainer.overfit_batches))

    def val_dataloader(self):
        return self._loader("val", shuffle=False)

    eval_split: str | None = None  # what `attnexp eval split=` tests on; None: test, or val where there is none

    def test_dataloader(self):
        return self._loader(self.eval_split or ("test" if "test" in self.splits else "val"), shuffle=False)

    # `self.encoder` (attnexp.data.encoder.TextEncoder) is set by each subclass's setup().
    def decode(self, ids) -> list[str]:
        return self.encoder.decode(ids)

    def encode_text(self, text: str) -> list[int]:
        return self.encoder.encode(text)

    def identity(self) -> dict:
        """What these examples are, recorded in every checkpoint and summary.json, so a resume onto
        other data is refused (`identity_mismatch`): the settings that choose the examples (not how
        they are batched), where they were read from, the split sizes and a hash of the tokenizer."""
        d = asdict(self.cfg)
        encoder = json.dumps(self.encoder.state(), sort_keys=True) if getattr(self, "encoder", None) else ""
        return {"settings": {k: v for k, v in d.items() if k not in BATCHING + LOCATION + HELD_OUT},
                "location": {k: d[k] for k in LOCATION if k in d},
                "splits": {k: len(v) for k, v in sorted(self.splits.items())},
                "tokenizer_sha256": hashlib.sha256(encoder.encode()).hexdigest()[:16],
                "seed": self.seed}  # the run's: batch order and a masked LM's masks, which eval repeats

    def state_dict(self) -> dict:
        """Saved by Lightning into every checkpoint: the encoder, so maps of new text need no data."""
        return {"encoder": self.encoder.state()} if getattr(self, "encoder", None) else {}

    def load_state_dict(self, state: dict) -> None:
        pass  # the encoder is rebuilt by setup() from the same data; the saved copy is for `attnexp maps`
