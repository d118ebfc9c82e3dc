"""The data sets' typed configs, kept apart from the DataModules so that validating a config
(and Hydra's schemas) does not import Lightning. Each names the DataModule that reads it."""

from __future__ import annotations

import codecs
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from attnexp.config import MAX_LEN, ConfigError, TaskConfig, check, from_dict


def utf8_problem(path: str | Path) -> str | None:
    """Why a text file (gzipped if it ends in .gz) is not UTF-8 text, in a few words, or None: read in
    1 MiB chunks, so a large file is never held twice. Every text file attnexp reads as data (a
    corpus, 20 Newsgroups' local files) is checked this way before a library parses it."""
    import gzip

    decoder, line = codecs.getincrementaldecoder("utf-8")(), 1
    with (gzip.open if str(path).endswith(".gz") else open)(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            if b"\0" in chunk:
                return "binary: it holds NUL bytes"
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError as e:
                at = line + chunk[: max(e.start, 0)].count(b"\n")
                return f"line {at}: {e.reason}"
            line += chunk.count(b"\n")
    return None


def not_utf8(path: str | Path, key: str, problem: str) -> ConfigError:
    if problem.startswith("binary"):
        return ConfigError(f"{key}={str(path)!r} looks binary (it holds NUL bytes); give a UTF-8 text file")
    return ConfigError(f"{key}={str(path)!r} is not UTF-8 text ({problem}); convert it first, "
                       f"e.g. iconv -f latin1 -t utf-8 IN > OUT")


def check_text_file(path: str, key: str) -> None:
    """A readable, non-empty UTF-8 text file, or a ConfigError that says what it is instead."""
    p = Path(path)
    check(p.exists(), f"{key}={path!r}: no such file; give a path to a UTF-8 text file (one sentence per line), "
                      f"or {key}=null for the built-in corpus")
    check(p.is_file(), f"{key}={path!r} is a folder; give a UTF-8 text file (one sentence per line)")
    problem = utf8_problem(p)
    if problem:
        raise not_utf8(path, key, problem)
    with open(p, "rb") as f:
        has_text = any(chunk.strip() for chunk in iter(lambda: f.read(1 << 20), b""))
    check(has_text, f"{key}={path!r} is empty; give a text file with one sentence per line")


@dataclass
class ToyDataConfig:
    module: ClassVar[str] = "attnexp.data.toy:ToyDataModule"
    name: str = "toy"
    corpus: str | None = None  # a UTF-8 text file, one sentence per line; null = built-in grammar
    n_sentences: int = 6000  # built-in grammar only
    seed: int = 0  # corpus generation and the train/val split
    min_freq: int = 1
    lowercase: bool = True
    max_len: int = 64
    batch_size: int = 64
    val_fraction: float = 0.1
    num_workers: int = 0  # the toy data is tiny: worker start-up would cost more than it saves
    pad_to_multiple_of: int | None = None  # batch lengths rounded up (null: 128 with FlexAttention, else none)
    bucket: bool = False

    def aligned(self, task: TaskConfig) -> bool:  # the grammar knows each verb's subject
        return self.corpus is None and task.name == "classify"

    def validate(self, task: TaskConfig) -> None:
        check(0 < self.val_fraction < 1, f"data.val_fraction={self.val_fraction} must be in (0, 1)")
        check(self.min_freq >= 1, f"data.min_freq={self.min_freq} must be >= 1")
        check(self.corpus is not None or self.n_sentences >= 10,
              f"data.n_sentences={self.n_sentences} is too few to split into train and validation; use at least 10")
        if self.corpus is not None:
            check_text_file(self.corpus, "data.corpus")
            check(task.name != "classify", "task=classify on a text file needs labels; use the built-in corpus "
                                           "(data.corpus=null, label = subject number) or data=newsgroups")


@dataclass
class NewsgroupsDataConfig:
    module: ClassVar[str] = "attnexp.data.newsgroups:NewsgroupsDataModule"
    name: str = "newsgroups"
    source: str = "auto"  # auto | local | hub | sklearn  (auto: local if `path` exists, else sklearn, else hub)
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
    seed: int = 0
    limit: int | None = None  # use only the first N posts of each split (tests, quick looks)
    bucket: bool = True  # batch posts of similar length together
    num_workers: int = 0
    pad_to_multiple_of: int | None = None  # batch lengths rounded up (null: 128 with FlexAttention, else none)
    cache_dir: str = "${oc.env:XDG_CACHE_HOME,${oc.env:HOME}/.cache}/attnexp"

    def aligned(self, task: TaskConfig) -> bool:
        return False

    def validate(self, task: TaskConfig) -> None:
        check(self.source in ("auto", "local", "hub", "sklearn"),
              f"data.source={self.source!r} is not one of: auto, local, hub, sklearn")
        bad = sorted(set(self.remove) - {"headers", "footers", "quotes"})
        check(not bad, f"data.remove has {bad}; allowed: headers, footers, quotes (e.g. data.remove=[headers,footers,quotes])")
        check(not (self.remove or self.source == "sklearn") or importlib.util.find_spec("sklearn") is not None,
              f"data.{'remove' if self.remove else 'source=sklearn'} needs scikit-learn: pip install 'attnexp[newsgroups]'")
        check(0 < self.val_fraction < 1, f"data.val_fraction={self.val_fraction} must be in (0, 1)")
        check(self.tokenizer_model in ("wordpiece", "bpe"),
              f"data.tokenizer_model={self.tokenizer_model!r} is not one of: wordpiece, bpe")
        check(self.vocab_size >= 100, f"data.vocab_size={self.vocab_size} is too small; use at least 100")
        check(self.limit is None or self.limit >= 10,
              f"data.limit={self.limit} is too few posts to split; use at least 10 (or null: all)")
        if self.source == "local":
            check(Path(self.path).is_dir(), f"data.path={self.path!r}: no such folder; give a folder holding train.* and "
                                            f"test.* (.jsonl[.gz], .csv or .parquet with text and label columns)")


SYNTHETIC_KINDS = ("copy", "reverse", "sort", "recall", "induction")


@dataclass
class SyntheticDataConfig:
    """Sequence tasks whose right attention is known in advance (see attnexp/data/synthetic.py)."""

    module: ClassVar[str] = "attnexp.data.synthetic:SyntheticDataModule"
    name: str = "synthetic"
    kind: str = "copy"  # copy | reverse | sort | recall | induction
    n_symbols: int = 16  # symbols a, b, c, ...
    length: int = 8  # items to copy/reverse/sort/repeat, or key-value pairs to recall from
    # each example draws its length from [min_length, length] (null: every example has `length`): a
    # fixed length lets a head solve induction by a fixed offset, a varied one needs an induction head
    min_length: int | None = None
    n_train: int = 6000
    n_val: int = 500
    n_test: int = 500  # a held-out test split, drawn apart from train and val (0: none; the best is rescored on val)
    seed: int = 0
    max_len: int = 64
    batch_size: int = 64
    num_workers: int = 0
    bucket: bool = False
    pad_to_multiple_of: int | None = None  # batch lengths rounded up (null: 128 with FlexAttention, else none)

    def aligned(self, task: TaskConfig) -> bool:
        return True

    def needed_len(self) -> int:
        return 2 * self.length + (4 if self.kind == "recall" else 3)

    def validate(self, task: TaskConfig) -> None:
        check(self.kind in SYNTHETIC_KINDS, f"data.kind={self.kind!r} is not one of: {', '.join(SYNTHETIC_KINDS)}")
        check(2 <= self.n_symbols <= 26 * 9, f"data.n_symbols={self.n_symbols} must be in [2, 234]")
        check(self.length >= 2, f"data.length={self.length} must be >= 2")
        check(self.min_length is None or 2 <= self.min_length <= self.length,
              f"data.min_length={self.min_length} must be in [2, data.length={self.length}] (or null)")
        check(self.n_train > 0 and self.n_val > 0, "data.n_train and data.n_val must be positive")
        check(self.n_test >= 0, f"data.n_test={self.n_test} must be >= 0 (0: no test split)")
        if self.kind in ("recall", "induction"):
            check(self.length <= self.n_symbols, f"data.kind={self.kind} draws {self.length} distinct symbols: "
                                                 f"raise data.n_symbols={self.n_symbols} or lower data.length")
        check(self.needed_len() <= self.max_len, f"data.kind={self.kind} with data.length={self.length} needs "
                                                 f"{self.needed_len()} tokens; raise data.max_len={self.max_len}")
        check(task.name == "lm", "data=synthetic has per-token targets; use task=lm")


DataConfig = ToyDataConfig | NewsgroupsDataConfig | SyntheticDataConfig
# data.name -> its config; the config's `module` names its DataModule ("package.module:Class").
SCHEMAS: dict[str, type[DataConfig]] = {"toy": ToyDataConfig, "newsgroups": NewsgroupsDataConfig,
                                        "synthetic": SyntheticDataConfig}


def load_data_config(raw: dict, task: TaskConfig):
    """The data config's `name` picks its dataclass; checks shared by all data sets, then its own."""
    name = raw.get("name")
    check(name in SCHEMAS, f"data.name={name!r} is not one of: {', '.join(SCHEMAS)}")
    cfg = from_dict(SCHEMAS[name], raw, "data")
    check(cfg.batch_size > 0, f"data.batch_size={cfg.batch_size} must be positive")
    check(cfg.max_len >= 3, f"data.max_len={cfg.max_len} leaves no room for a token between the start and end "
                            f"markers; use at least 3")
    check(cfg.max_len <= MAX_LEN, f"data.max_len={cfg.max_len} is beyond attnexp's limit of {MAX_LEN:,} tokens")
    check(cfg.num_workers >= 0, f"data.num_workers={cfg.num_workers} must be >= 0")
    check(cfg.pad_to_multiple_of is None or cfg.pad_to_multiple_of >= 1,
          f"data.pad_to_multiple_of={cfg.pad_to_multiple_of} must be >= 1 (or null)")
    cfg.validate(task)
    return cfg
