"""`data=text`: 20 Newsgroups as one stream of tokens for a language model, nanoGPT's way: every
post encoded whole as [CLS] post [SEP], the posts of a split joined, and the stream cut into windows
of `max_len` tokens, the examples (one tensor view, no copy; attnexp.data.table batches it).

Tokens: bytes (a byte-level vocabulary of 256 + the 5 specials, nothing to train) or a small BPE or
WordPiece trained on the training posts (data.tokenizer_model, data.vocab_size). With
`repeat_fraction` > 0 that fraction of the windows (seeded) end with a repeat of an earlier span of
the same window, k tokens long (k in [max_len/4, max_len/2]), the span drawn from anywhere before it:
text richer in repeats, so a small model meets what induction heads are for within a CPU
run (Olsson et al.'s natural text gives the circuit a weak signal). Training and validation windows
get repeats (other draws), so the in-context score is read on held-out text of the kind trained on;
the test split stays plain text.
"""

from __future__ import annotations

import random
from pathlib import Path

import datasets
import numpy as np
import torch
from tokenizers import Tokenizer, decoders, models, normalizers
from tokenizers.pre_tokenizers import ByteLevel

from attnexp.config import layout
from attnexp.config.paths import write_whole
from attnexp.data.encoder import TextEncoder
from attnexp.data.newsgroups import NewsgroupsDataModule
from attnexp.data.table import Table
from attnexp.data.tokenizer import SUBWORD_SPECIALS, finish, get_tokenizer


def byte_tokenizer(lowercase: bool):
    """A tokenizer.json-shaped byte-level tokenizer: the 5 specials, then one token per byte."""
    vocab = {t: i for i, t in enumerate(SUBWORD_SPECIALS + sorted(ByteLevel.alphabet()))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="[UNK]"))
    tok.pre_tokenizer = ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    if lowercase:
        tok.normalizer = normalizers.Lowercase()
    tok.add_special_tokens(SUBWORD_SPECIALS)
    return tok


def with_repeats(windows: torch.Tensor, fraction: float, seed: int) -> torch.Tensor:
    """`windows` (N, T) with a seeded `fraction` of rows whose last k tokens (k in [T/4, T/2]) repeat an
    earlier span of the row, drawn from anywhere before them: the distance varies, so no head looking a
    fixed way back solves it, and a window may or may not end in a repeat, so only matching content
    tells (a model that always copied at the end would lose on the others)."""
    if fraction <= 0:
        return windows
    out, rng = windows.clone(), random.Random(seed)
    T = windows.shape[1]
    for r in range(windows.shape[0]):
        if rng.random() < fraction:
            k = rng.randint(T // 4, T // 2)
            a = rng.randint(0, T - 2 * k)  # the span ends before the repeat begins
            out[r, T - k:] = windows[r, a: a + k]
    return out


class Rows:
    """A split's windows as the item list other parts read (probes, importance, counts): rows of
    the table, made on demand."""

    def __init__(self, ids: torch.Tensor):
        self.ids = ids

    def __len__(self) -> int:
        return self.ids.shape[0]

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return {"input_ids": self.ids[i].tolist(), "idx": int(i) % len(self)}

    def __iter__(self):
        return (self[i] for i in range(len(self)))


class TextDataModule(NewsgroupsDataModule):
    def __init__(self, cfg, task, causal: bool, run_dir: str | None = None, seed: int = 0):
        super().__init__(cfg, task, causal, run_dir, seed)
        self.num_classes, self._class_names = None, None
        self.windows: dict[str, torch.Tensor] = {}
        self.plain_val: torch.Tensor | None = None  # the validation windows before any repeat was planted

    def tokenizer(self, texts_fn):
        c = self.cfg
        if c.tokenizer_model != "bytes" or c.tokenizer:
            key = {"text_stream": True, "model": c.tokenizer_model, "vocab_size": c.vocab_size, "lowercase": c.lowercase,
                   "posts": len(texts_fn())}
            return get_tokenizer(c.tokenizer, texts_fn, self.cache / "tokenizers", key, c.tokenizer_model,
                                 c.vocab_size, c.lowercase, c.max_len)[0]

        return finish(byte_tokenizer(c.lowercase), c.max_len)

    def setup(self, stage: str | None = None) -> None:
        if self.windows:
            return
        datasets.disable_progress_bars()
        c = self.cfg
        splits = self.prepare_splits()
        tok = self.tokenizer(lambda: splits["train"]["text"])
        self.encoder = TextEncoder("tokenizer", tok.to_str(), c.lowercase, c.max_len)
        if self.run_dir:
            write_whole(Path(self.run_dir) / layout.TOKENIZER, lambda tmp: tok.save(str(tmp)))
        tok.no_truncation()  # posts whole: the windows cut the stream
        self.vocab_size = tok.get_vocab_size()
        self.pad_id, self.mask_id = tok.token_to_id("[PAD]"), tok.token_to_id("[MASK]")
        self.first_word_id = max(tok.token_to_id(s) for s in SUBWORD_SPECIALS) + 1
        T = c.max_len
        for split, posts in splits.items():
            stream = torch.tensor([i for e in tok.encode_batch(posts["text"]) for i in e.ids], dtype=torch.long)
            windows = stream[: len(stream) // T * T].view(-1, T)
            if split != "train" and windows.shape[0] > c.max_eval_windows:  # a seeded subset: evaluation stays quick
                keep = torch.randperm(windows.shape[0], generator=torch.Generator().manual_seed(c.seed))[: c.max_eval_windows]
                windows = windows[keep.sort().values]
            seed = {"train": c.seed, "val": c.seed + 1}.get(split)
            self.windows[split] = windows if seed is None else with_repeats(windows, c.repeat_fraction, seed)
            if split == "val":
                self.plain_val = windows
        self.splits = {k: Rows(v) for k, v in self.windows.items()}

    def plain_probe_ids(self, n: int) -> list[list[int]]:
        """The first `n` validation windows as they were before any repeat was planted (the probe's own
        windows when nothing is): the timeline's `icl_plain` is read on them."""
        return self.plain_val[:n].tolist()

    def new_table(self, split: str, collator) -> Table:
        ids = self.windows[split]  # every window max_len long: no padding, no copy
        return Table(ids, np.full(ids.shape[0], ids.shape[1]), None, collator)
