from __future__ import annotations

import re
from collections import Counter

WORD_SPECIALS = ["[PAD]", "[UNK]", "[BOS]", "[EOS]", "[MASK]", "[SEP]"]
PAD, UNK, BOS, EOS, MASK, SEP = range(len(WORD_SPECIALS))
_WORD = re.compile(r"\w+|[^\w\s]")


def words(text: str, lowercase: bool = True) -> list[str]:
    return _WORD.findall(text.lower() if lowercase else text)


class Vocab:
    """Word-level vocabulary: the specials first (ids 0..5), then words by frequency."""

    def __init__(self, tokens: list[str]):
        self.itos = list(tokens)
        self.stoi = {t: i for i, t in enumerate(self.itos)}

    @classmethod
    def build(cls, sentences, min_freq: int = 1, extra: list[str] = ()) -> Vocab:
        counts = Counter(w for s in sentences for w in s)
        kept = [w for w, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if c >= min_freq]
        return cls(WORD_SPECIALS + list(extra) + [w for w in kept if w not in WORD_SPECIALS and w not in extra])

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, sentence: list[str]) -> list[int]:
        return [self.stoi.get(w, UNK) for w in sentence]

    def decode(self, ids) -> list[str]:
        return [self.itos[int(i)] for i in ids]
