"""`data=synthetic`: tasks whose right attention pattern is known, for checking what heads learn.

Layouts (x = source symbols, y = answer, n = data.length):
  copy / reverse / sort   [BOS] x1..xn [SEP] y1..yn [EOS]     y = x, reversed x, sorted x
  induction               [BOS] r1..rn r1..rn [EOS]           the first half repeats
  recall                  [BOS] k1 v1 .. kn vn [SEP] kq vq [EOS]   look the value up by its key
  repeat                  [BOS] p1..pm s1..sk s1..sk [EOS]    Olsson et al.'s form: n = m + 2k tokens, a
                          random prefix, then a segment of random length k in [n/4, n/2] and its repeat
                          (symbols drawn with replacement); a causal model predicts every next token
                          (a language model's loss: only the repeat is predictable), a bidirectional
                          one the masked repeat
Causal attention predicts each answer token from the position before it; bidirectional attention
sees [MASK] in place of the answers and predicts them there. Every item lists `align`: the
(query, key) pairs where a head solving the task must look — the source of each answer token.
"""

from __future__ import annotations

import random
import string

from attnexp.config.data import IGNORE
from attnexp.data.base import TokenDataModule
from attnexp.data.encoder import TextEncoder
from attnexp.data.vocab import BOS, EOS, MASK, PAD, SEP, WORD_SPECIALS


def symbol_names(n: int) -> list[str]:
    letters = string.ascii_lowercase
    return [letters[i % 26] + ("" if i < 26 else str(i // 26)) for i in range(n)]


def example(kind: str, n: int, n_symbols: int, rng: random.Random, causal: bool) -> dict:
    first = len(WORD_SPECIALS)
    if kind == "repeat":
        return repeat_example(n, n_symbols, rng, causal)
    draw = (lambda k: rng.sample(range(first, first + n_symbols), k)) if kind in ("recall", "induction") else \
        (lambda k: [rng.randrange(first, first + n_symbols) for _ in range(k)])
    if kind == "recall":
        keys, vals = draw(n), [rng.randrange(first, first + n_symbols) for _ in range(n)]
        q = rng.randrange(n)
        prefix = [BOS] + [t for kv in zip(keys, vals) for t in kv] + [SEP, keys[q]]
        answers, sources = [vals[q]], [2 * q + 2]  # position of the value of the queried key
    else:
        x = draw(n)
        order = {"copy": list(range(n)), "reverse": list(range(n))[::-1],
                 "sort": sorted(range(n), key=lambda i: x[i]), "induction": list(range(n))}[kind]
        prefix = [BOS] + x + ([] if kind == "induction" else [SEP])
        answers, sources = [x[i] for i in order], [1 + i for i in order]
        if kind == "induction":  # the first answer token is not predictable from the past: start at r2
            prefix, answers, sources = prefix + [x[0]], answers[1:], sources[1:]
    ids, labels, align = list(prefix), [IGNORE] * len(prefix), []
    for y, src in zip(answers, sources):
        if causal:  # predicted at the previous position, which is then followed by y itself
            labels[-1] = y
            align.append((len(ids) - 1, src))
            ids.append(y)
            labels.append(IGNORE)
        else:
            align.append((len(ids), src))
            ids.append(MASK)
            labels.append(y)
    return {"input_ids": ids + [EOS], "labels": labels + [IGNORE], "align": align}


def repeat_example(n: int, n_symbols: int, rng: random.Random, causal: bool) -> dict:
    """Olsson et al. (2022)'s repeated random tokens (module docstring). `align`: each prediction of
    the repeat (but its first token) and the token after the earlier occurrence, where an induction
    head looks; the distance varies with k, so no fixed-offset head solves it."""
    first = len(WORD_SPECIALS)
    k = rng.randint(max(1, n // 4), max(1, n // 2))
    draw = lambda m: [rng.randrange(first, first + n_symbols) for _ in range(m)]  # noqa: E731
    seg = draw(k)
    ids = [BOS, *draw(n - 2 * k), *seg, *seg]
    second = len(ids) - k  # the repeat's first position
    if causal:  # position q predicts ids[q + 1]; in the repeat, ids[q + 1] = ids[q - k + 1]
        labels = [*ids[1:], IGNORE]
        align = [(q, q - k + 1) for q in range(second, len(ids) - 1)]
    else:
        labels = [IGNORE] * len(ids)
        align = []
        for q in range(second + 1, len(ids)):
            labels[q], ids[q] = ids[q], MASK
            align.append((q, q - k))
    return {"input_ids": [*ids, EOS], "labels": [*labels, IGNORE], "align": align}


class SyntheticDataModule(TokenDataModule):
    def __init__(self, cfg, task, causal: bool, run_dir: str | None = None, seed: int = 0):
        super().__init__(cfg, task, causal, seed)
        self.pad_id, self.mask_id, self.first_word_id = PAD, MASK, len(WORD_SPECIALS)
        names = WORD_SPECIALS + symbol_names(cfg.n_symbols)
        self.vocab_size = len(names)
        self.encoder = TextEncoder("words", names, lowercase=True, max_len=cfg.max_len)

    @property
    def label_kind(self) -> str:
        return "given"

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        c = self.cfg
        # three streams of one seed: the test split is held out from the checkpoint chosen on val
        for split, n, seed in (("train", c.n_train, c.seed), ("val", c.n_val, c.seed + 1), ("test", c.n_test, c.seed + 2)):
            if n == 0:
                continue
            rng = random.Random(seed)
            lengths = [c.length if c.min_length is None else rng.randint(c.min_length, c.length) for _ in range(n)]
            self.splits[split] = [{**example(c.kind, k, c.n_symbols, rng, self.causal), "idx": i} for i, k in enumerate(lengths)]
