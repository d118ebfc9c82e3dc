"""`data=toy`: a word-level vocabulary over the built-in grammar corpus or any text file."""

from __future__ import annotations

import random
from pathlib import Path

from attnexp.config import ConfigError
from attnexp.data import grammar
from attnexp.data.base import TokenDataModule
from attnexp.data.encoder import TextEncoder
from attnexp.data.vocab import MASK, PAD, WORD_SPECIALS, Vocab, words


class ToyDataModule(TokenDataModule):
    def __init__(self, cfg, task, causal: bool, run_dir=None, seed: int = 0):  # cfg: data.configs.ToyDataConfig
        super().__init__(cfg, task, causal, seed)
        self.pad_id, self.mask_id, self.first_word_id = PAD, MASK, len(WORD_SPECIALS)

    def load_sentences(self) -> list[grammar.Sentence]:
        cfg = self.cfg
        if cfg.corpus is None:  # classification: the subject's number, in past-tense sentences (no verb tells it)
            return grammar.corpus(cfg.n_sentences, cfg.seed, past=self.task.name == "classify")
        text = Path(cfg.corpus).read_text(encoding="utf-8", errors="replace")
        sents, span = [], cfg.max_len - 2
        for line in text.splitlines():
            ws = words(line, cfg.lowercase)
            sents += [grammar.Sentence(ws[i: i + span], False, -1, -1) for i in range(0, len(ws), span)]
        if len(sents) < 10:
            raise ConfigError(f"data.corpus={cfg.corpus!r} has {len(sents)} non-empty lines; give at least 10")
        return sents

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return  # idempotent: train.py calls it before building the model, Lightning again later
        sents = self.load_sentences()
        train_ids, val_ids = disjoint_split([" ".join(s.words) for s in sents], self.cfg.val_fraction, self.cfg.seed)
        self.vocab = Vocab.build([sents[i].words for i in train_ids], self.cfg.min_freq)
        self.vocab_size = len(self.vocab)
        self.encoder = TextEncoder("words", self.vocab.itos, self.cfg.lowercase, self.cfg.max_len)
        self.num_classes = 2 if self.cfg.corpus is None else None
        self._class_names = ["singular", "plural"]  # the subject's number

        classify = self.task.name == "classify"

        def item(i):
            s = sents[i]
            it = {"input_ids": self.encoder.encode_words(s.words), "label": int(s.plural), "idx": i}
            if classify and 0 <= s.subject < self.cfg.max_len - 2:  # where the pooled [BOS] must look: the subject
                it["align"] = [(0, s.subject + 1)]
            return it

        self.splits = {"train": [item(i) for i in train_ids], "val": [item(i) for i in val_ids]}


def disjoint_split(keys: list[str], val_fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """A seeded split in which no validation sentence also occurs in train: the grammar repeats
    short sentences (8.5% of a plain split's validation sentences were training sentences too).
    Validation takes one copy of each of the first distinct sentences of a shuffled order; every
    copy of those sentences stays out of train."""
    order = list(range(len(keys)))
    random.Random(seed).shuffle(order)
    n_val, held, val = max(1, int(len(keys) * val_fraction)), set(), []
    for i in order:
        if len(val) == n_val:
            break
        if keys[i] not in held:
            held.add(keys[i])
            val.append(i)
    return [i for i in order if keys[i] not in held], val
