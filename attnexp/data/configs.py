"""The built-in data sets' typed configs (attnexp.config.data: the base, the registry), kept apart
from the DataModules so that validating a config (and Hydra's schemas) does not import Lightning.
Each imports the DataModule that reads it in `datamodule()`."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

from attnexp.config import TaskConfig, check, plugins
from attnexp.config.data import DataConfig, load, register
from attnexp.config.paths import default_cache_dir
from attnexp.data.text_files import check_text_file

# What a setting may make attnexp generate or train, the same from the command line and from a
# checkpoint's recorded data (eval, resume): a stranger's file asking for 10**9 sentences is one line
# before anything is built, not minutes of generation.
MAX_EXAMPLES = 1_000_000
MAX_VOCAB = 262_144


@register
@dataclass
class ToyDataConfig(DataConfig):
    """The built-in grammar, or a text file; seed: the corpus's generation and the train/val split.
    num_workers stays 0: the toy data is tiny, worker start-up would cost more than it saves."""

    name: str = "toy"
    corpus: str | None = None  # a UTF-8 text file, one sentence per line; null = built-in grammar
    n_sentences: int = 6000  # built-in grammar only
    min_freq: int = 1
    lowercase: bool = True
    val_fraction: float = 0.1

    def datamodule(self) -> type:
        from attnexp.data.toy import ToyDataModule

        return ToyDataModule

    def aligned(self, task: TaskConfig) -> bool:  # the grammar knows each verb's subject
        return self.corpus is None and task.name == "classify"

    def validate(self, task: TaskConfig) -> None:
        check(0 < self.val_fraction < 1, f"data.val_fraction={self.val_fraction} must be in (0, 1)")
        check(self.min_freq >= 1, f"data.min_freq={self.min_freq} must be >= 1")
        check(self.corpus is not None or self.n_sentences >= 10,
              f"data.n_sentences={self.n_sentences} is too few to split into train and validation; use at least 10")
        check(self.n_sentences <= MAX_EXAMPLES, f"data.n_sentences={self.n_sentences:,} is beyond attnexp's limit of "
                                                f"{MAX_EXAMPLES:,} generated sentences; use fewer, or a text file (data.corpus=)")
        if self.corpus is not None:
            check_text_file(self.corpus, "data.corpus")
            check(task.name != "classify", "task=classify on a text file needs labels; use the built-in corpus "
                                           "(data.corpus=null, label = subject number) or data=newsgroups")


@register
@dataclass
class NewsgroupsDataConfig(DataConfig):
    """The 20 Newsgroups "bydate" split; seed: the stratified val split carved from train."""

    name: str = "newsgroups"
    source: str = "auto"  # auto | local | hub | sklearn  (auto: `path`; the default path missing: sklearn, else hub)
    path: str = "../shared/data/20newsgroups"  # local: a folder with train.* and test.* (.jsonl[.gz], .csv, .parquet)
    hub_name: str = "SetFit/20_newsgroups"
    remove: list[str] = field(default_factory=list)  # any of headers, footers, quotes (as sklearn's remove=)
    tokenizer: str | None = None  # a tokenizer.json path or a hub name; null = train one on the train split
    tokenizer_model: str = "wordpiece"  # wordpiece | bpe (when training one)
    vocab_size: int = 16000
    lowercase: bool = True
    max_len: int = 256  # tokens per post, [CLS] and [SEP] included; longer posts are truncated
    batch_size: int = 32
    val_fraction: float = 0.1  # stratified, seeded, carved from train; the bydate test split stays for test
    limit: int | None = None  # use only the first N posts of each split (tests, quick looks)
    bucket: bool = True  # batch posts of similar length together
    cache_dir: str = field(default_factory=default_cache_dir)  # conf/data/newsgroups.yaml: ${paths.cache_dir}

    def datamodule(self) -> type:
        from attnexp.data.newsgroups import NewsgroupsDataModule

        return NewsgroupsDataModule

    def validate(self, task: TaskConfig) -> None:
        check(self.source in ("auto", "local", "hub", "sklearn"),
              f"data.source={self.source!r} is not one of: auto, local, hub, sklearn")
        bad = sorted(set(self.remove) - {"headers", "footers", "quotes"})
        check(not bad, f"data.remove has {bad}; allowed: headers, footers, quotes (e.g. data.remove=[headers,footers,quotes])")
        check(not (self.remove or self.source == "sklearn") or importlib.util.find_spec("sklearn") is not None,
              f"data.{'remove' if self.remove else 'source=sklearn'} needs scikit-learn: pip install 'attnexp[newsgroups]'")
        check(0 < self.val_fraction < 1, f"data.val_fraction={self.val_fraction} must be in (0, 1)")
        check(self.tokenizer_model in ("wordpiece", "bpe") or self.name == "text",
              f"data.tokenizer_model={self.tokenizer_model!r} is not one of: wordpiece, bpe")
        check(100 <= self.vocab_size <= MAX_VOCAB, f"data.vocab_size={self.vocab_size:,} must be in [100, {MAX_VOCAB:,}]")
        check(self.limit is None or self.limit >= 10,
              f"data.limit={self.limit} is too few posts to split; use at least 10 (or null: all)")
        # auto fetches only while data.path is its default: a folder of one's own that is not there (a typo, an
        # unmounted disk) is said, not replaced by a download of other data
        if self.source == "local" or (self.source == "auto" and self.path != NewsgroupsDataConfig.path):
            check(Path(self.path).is_dir(), f"data.path={self.path!r}: no such folder; give a folder holding train.* and "
                                            f"test.* (.jsonl[.gz], .csv or .parquet with text and label columns), or "
                                            f"data.source=sklearn or hub to download it")


@register
@dataclass
class TextDataConfig(NewsgroupsDataConfig):
    """20 Newsgroups as one token stream for a language model, cut into windows of max_len tokens
    (attnexp/data/text.py); seed: the val split, its subset and the repeats."""

    name: str = "text"
    tokenizer_model: str = "bytes"  # bytes (256 + 5 specials, nothing trained) | bpe | wordpiece (trained on train)
    vocab_size: int = 1024  # bpe / wordpiece only
    lowercase: bool = False
    max_len: int = 128  # tokens per window
    bucket: bool = False  # every window is max_len long
    repeat_fraction: float = 0.0  # training and validation windows ending in a repeat of an earlier span of the same window
    max_eval_windows: int = 2048  # a seeded subset of the validation (and test) windows

    def datamodule(self) -> type:
        from attnexp.data.text import TextDataModule

        return TextDataModule

    def validate(self, task: TaskConfig) -> None:
        check(self.tokenizer_model in ("bytes", "bpe", "wordpiece"),
              f"data.tokenizer_model={self.tokenizer_model!r} is not one of: bytes, bpe, wordpiece")
        check(0 <= self.repeat_fraction <= 1, f"data.repeat_fraction={self.repeat_fraction} must be in [0, 1]")
        check(self.max_len >= 8, f"data.max_len={self.max_len}: a window of text needs at least 8 tokens")
        check(1 <= self.max_eval_windows <= MAX_EXAMPLES,
              f"data.max_eval_windows={self.max_eval_windows} must be in [1, {MAX_EXAMPLES:,}]")
        check(task.name == "lm", "data=text is a language model's data (no labels); use task=lm, or data=newsgroups "
                                 "to classify posts")
        super().validate(task)


SYNTHETIC_KINDS = ("copy", "reverse", "sort", "recall", "induction", "repeat")


@register
@dataclass
class SyntheticDataConfig(DataConfig):
    """Sequence tasks whose right attention is known in advance (see attnexp/data/synthetic.py);
    seed: the three streams train, val and test are drawn from."""

    name: str = "synthetic"
    kind: str = "copy"  # copy | reverse | sort | recall | induction | repeat (Olsson et al.'s: length = all tokens)
    n_symbols: int = 16  # symbols a, b, c, ...
    length: int = 8  # items to copy/reverse/sort/repeat, or key-value pairs to recall from
    # each example draws its length from [min_length, length] (null: every example has `length`): a
    # fixed length lets a head solve induction by a fixed offset, a varied one needs an induction head
    min_length: int | None = None
    n_train: int = 6000
    n_val: int = 500
    n_test: int = 500  # a held-out test split, drawn apart from train and val (0: none; the best is rescored on val)

    def datamodule(self) -> type:
        from attnexp.data.synthetic import SyntheticDataModule

        return SyntheticDataModule

    def aligned(self, task: TaskConfig) -> bool:
        return True

    def needed_len(self) -> int:
        if self.kind == "repeat":  # [BOS] + `length` tokens (prefix, segment, repeat) + [EOS]
            return self.length + 2
        return 2 * self.length + (4 if self.kind == "recall" else 3)

    def validate(self, task: TaskConfig) -> None:
        check(self.kind in SYNTHETIC_KINDS, f"data.kind={self.kind!r} is not one of: {', '.join(SYNTHETIC_KINDS)}")
        check(2 <= self.n_symbols <= 26 * 9, f"data.n_symbols={self.n_symbols} must be in [2, 234]")
        check(self.length >= 2, f"data.length={self.length} must be >= 2")
        check(self.min_length is None or 2 <= self.min_length <= self.length,
              f"data.min_length={self.min_length} must be in [2, data.length={self.length}] (or null)")
        check(self.n_train > 0 and self.n_val > 0, "data.n_train and data.n_val must be positive")
        check(self.n_test >= 0, f"data.n_test={self.n_test} must be >= 0 (0: no test split)")
        for split in ("n_train", "n_val", "n_test"):
            n = getattr(self, split)
            check(n <= MAX_EXAMPLES, f"data.{split}={n:,} is beyond attnexp's limit of {MAX_EXAMPLES:,} generated examples")
        check(self.kind != "repeat" or self.length >= 8, f"data.kind=repeat with data.length={self.length}: the "
              "sequence holds a prefix, a segment of a quarter to a half of it and its repeat; give data.length >= 8")
        if self.kind in ("recall", "induction"):
            check(self.length <= self.n_symbols, f"data.kind={self.kind} draws {self.length} distinct symbols: "
                                                 f"raise data.n_symbols={self.n_symbols} or lower data.length")
        check(self.needed_len() <= self.max_len, f"data.kind={self.kind} with data.length={self.length} needs "
                                                 f"{self.needed_len()} tokens; raise data.max_len={self.max_len}")
        check(task.name == "lm", "data=synthetic has per-token targets; use task=lm")


def load_data_config(raw: dict, task: TaskConfig) -> DataConfig:
    """The data config `raw` names (attnexp.config.data.load), the built-in data sets registered."""
    return load(raw, task)


plugins.load("attnexp.data")  # installed packages' data sets, registered beside the built-in ones (docs/extending.md)
