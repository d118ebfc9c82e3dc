"""Source of throwaway modules that more than one test writes out (a data set, a plugin)."""

COUNTING_MODULE = '''
import random
from dataclasses import dataclass

from attnexp.config import check
from attnexp.config.data import DataConfig, register
from attnexp.data.base import TokenDataModule
from attnexp.config.data import IGNORE
from attnexp.data.encoder import TextEncoder
from attnexp.data.vocab import BOS, EOS, MASK, PAD, WORD_SPECIALS


@register
@dataclass
class CountingDataConfig(DataConfig):
    """Counting up from a random symbol: each next symbol is the one after the last."""

    name: str = "throwaway_counting"
    n_symbols: int = 12
    length: int = 6
    n_train: int = 300
    n_val: int = 60
    max_len: int = 16

    def datamodule(self):
        return CountingDataModule

    def validate(self, task):
        check(self.length + 2 <= self.max_len, f"data.length={self.length} needs {self.length + 2} tokens; raise "
                                               f"data.max_len={self.max_len}")
        check(task.name == "lm", "data=throwaway_counting has next-symbol targets; use task=lm")


class CountingDataModule(TokenDataModule):
    def __init__(self, cfg, task, causal, run_dir=None, seed=0):
        super().__init__(cfg, task, causal, seed)
        self.pad_id, self.mask_id, self.first_word_id = PAD, MASK, len(WORD_SPECIALS)
        names = WORD_SPECIALS + [f"s{i}" for i in range(cfg.n_symbols)]
        self.vocab_size = len(names)
        self.encoder = TextEncoder("words", names, lowercase=True, max_len=cfg.max_len)

    @property
    def label_kind(self):
        return "given"

    def setup(self, stage=None):
        if self.splits:
            return
        c, first = self.cfg, len(WORD_SPECIALS)
        for split, n, seed in (("train", c.n_train, c.seed), ("val", c.n_val, c.seed + 1)):
            rng, items = random.Random(seed), []
            for i in range(n):
                start = rng.randrange(c.n_symbols)
                ids = [BOS] + [first + (start + k) % c.n_symbols for k in range(c.length)] + [EOS]
                items.append({"input_ids": ids, "labels": ids[1:-1] + [IGNORE, IGNORE], "idx": i})
            self.splits[split] = items
'''


def halved_variant(name: str, summary: str) -> str:
    """A plugin's attention variant module: multi-head attention whose queries are halved before the
    scores (softer maps), registered as `name`."""
    return f'''
from attnexp.attention.registry import register
from attnexp.attention.variants.mha import MultiHead


@register
class Halved(MultiHead):
    """Multi-head attention whose queries are halved before the scores: softer maps (a plugin's variant)."""

    name = {name!r}
    summary = {summary!r}

    def rotate(self, q_BHTD, k_BGTD):
        return q_BHTD * 0.5, k_BGTD
'''

