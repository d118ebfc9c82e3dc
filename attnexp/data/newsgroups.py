"""`data=newsgroups`: 20 Newsgroups from a local copy, the Hugging Face hub or sklearn, cleaned
and tokenized through `datasets.map(batched=True)` (cached), into length-bucketed batches."""

from __future__ import annotations

import gzip
import importlib.util
import json
import logging
import time
import warnings
from pathlib import Path

import datasets
from datasets import ClassLabel, DatasetDict

from attnexp.compat.datasets import fingerprint
from attnexp.config import ConfigError, hub_offline, layout
from attnexp.config.paths import write_whole
from attnexp.data.base import TokenDataModule
from attnexp.data.encoder import TextEncoder
from attnexp.data.text_files import not_utf8, utf8_problem
from attnexp.data.tokenizer import get_tokenizer

log = logging.getLogger("attnexp")
NAMES = ["alt.atheism", "comp.graphics", "comp.os.ms-windows.misc", "comp.sys.ibm.pc.hardware", "comp.sys.mac.hardware",
         "comp.windows.x", "misc.forsale", "rec.autos", "rec.motorcycles", "rec.sport.baseball", "rec.sport.hockey",
         "sci.crypt", "sci.electronics", "sci.med", "sci.space", "soc.religion.christian", "talk.politics.guns",
         "talk.politics.mideast", "talk.politics.misc", "talk.religion.misc"]
EXT = {".jsonl": "json", ".json": "json", ".jsonl.gz": "json", ".json.gz": "json", ".csv": "csv", ".parquet": "parquet"}
OFFLINE_HINT = ("point at a local copy instead: data.source=local data.path=DIR, where DIR holds train.* and test.* "
                "(.jsonl[.gz], .csv or .parquet with `text` and `label` columns)")


def offline() -> bool:
    return hub_offline("HF_DATASETS_OFFLINE")


def local_files(folder: Path) -> dict[str, str]:
    files = {}
    for split in ("train", "test"):
        found = [p for p in sorted(folder.glob(f"{split}.*")) if "".join(p.suffixes) in EXT]
        if not found:
            raise ConfigError(f"data.path={str(folder)!r} has no {split}.jsonl[.gz] / {split}.csv / {split}.parquet; "
                              f"{OFFLINE_HINT}")
        files[split] = str(found[0])
    return files


def unreadable(files: dict[str, str], builder: str, error: Exception) -> str:
    """One line naming the file and the 1-based line that could not be read."""
    if builder == "json":
        for path in files.values():
            opener = gzip.open if path.endswith(".gz") else open
            try:
                with opener(path, "rt", encoding="utf-8") as f:
                    for n, line in enumerate(f, 1):
                        if not line.strip():
                            continue
                        try:
                            row = json.loads(line)
                        except json.JSONDecodeError as e:
                            return f"{path} line {n}: not valid JSON ({e.msg} at column {e.colno}); fix or remove that line"
                        if not isinstance(row, dict):
                            return f"{path} line {n}: a JSON {type(row).__name__}, not an object with `text` and `label`"
            except (UnicodeDecodeError, OSError) as e:
                return f"{path}: cannot be read as UTF-8 JSON lines ({e}); give .jsonl[.gz] with one object per line"
    reason = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
    return f"could not read {', '.join(files.values())} ({type(error).__name__}: {reason[:200]})"


def check_labels(labels: list, path: str) -> None:
    """Labels must be integers in [0, 20): found at load time, not mid-training."""
    for n, y in enumerate(labels, 1):
        if not isinstance(y, int) or isinstance(y, bool) or not 0 <= y < len(NAMES):
            raise ConfigError(f"{path} row {n}: label {y!r} is not an integer in [0, {len(NAMES)}) "
                              f"(20 Newsgroups labels, alphabetical by group name)")


def clean(batch: dict, remove: tuple[str, ...]) -> dict:
    """sklearn's own header/footer/quote strippers, so `remove` means exactly what sklearn's does."""
    try:
        from attnexp.compat.sklearn import newsgroup_strippers

        strip_newsgroup_header, strip_newsgroup_footer, strip_newsgroup_quoting = newsgroup_strippers()
    except ImportError:
        raise ConfigError("data.remove uses scikit-learn's own strippers: pip install 'attnexp[newsgroups]' "
                          "(or scikit-learn)") from None

    out = []
    for text in batch["text"]:
        if "headers" in remove:
            text = strip_newsgroup_header(text)
        if "footers" in remove:
            text = strip_newsgroup_footer(text)
        if "quotes" in remove:
            text = strip_newsgroup_quoting(text)
        out.append(text)
    return {"text": out}


class NewsgroupsDataModule(TokenDataModule):
    def __init__(self, cfg, task, causal: bool, run_dir: str | None = None, seed: int = 0):
        super().__init__(cfg, task, causal, seed)
        self.run_dir = run_dir
        self.cache = Path(cfg.cache_dir).expanduser()
        self.timings: dict[str, float] = {}
        self.num_classes, self._class_names = len(NAMES), list(NAMES)

    def resolve_source(self) -> str:
        c = self.cfg
        if c.source != "auto":
            return c.source
        if Path(c.path).is_dir():
            return "local"
        return "sklearn" if importlib.util.find_spec("sklearn") else "hub"

    def load_raw(self) -> DatasetDict:
        c, source = self.cfg, self.resolve_source()
        hf_cache = str(self.cache / "hf")
        if source == "local":
            files = local_files(Path(c.path))
            builder = EXT["".join(Path(files["train"]).suffixes)]
            for path in files.values() if builder != "parquet" else ():  # before pyarrow, which passes bad bytes on
                problem = utf8_problem(path)
                if problem:
                    raise not_utf8(path, "data.path file", problem)
            try:
                ds = datasets.load_dataset(builder, data_files=files, cache_dir=hf_cache)
            except Exception as e:  # datasets' error names a row of no file: find the line ourselves
                raise ConfigError(unreadable(files, builder, e)) from None
            for split, path in files.items():
                missing = {"text", "label"} - set(ds[split].column_names)
                if missing:
                    raise ConfigError(f"{path} has no {', '.join(sorted(missing))} column; it needs `text` and `label`")
                check_labels(ds[split]["label"], path)
        elif source == "hub":
            if offline():
                raise ConfigError(f"data.source=hub needs the network (HF_HUB_OFFLINE is set); {OFFLINE_HINT}")
            try:
                ds = datasets.load_dataset(c.hub_name, cache_dir=hf_cache)
            except Exception as e:
                raise ConfigError(f"could not load {c.hub_name!r} from the hub ({type(e).__name__}); {OFFLINE_HINT}") from e
        else:
            ds = self.load_sklearn()
        ds = DatasetDict({k: ds[k].select_columns(["text", "label"]) for k in ("train", "test")})
        return ds.cast_column("label", ClassLabel(names=NAMES))

    def load_sklearn(self) -> DatasetDict:
        try:
            from sklearn.datasets import fetch_20newsgroups
        except ImportError as e:
            raise ConfigError(f"data.source=sklearn needs scikit-learn (pip install 'attnexp[newsgroups]'); "
                              f"{OFFLINE_HINT}") from e
        out = {}
        for split in ("train", "test"):
            try:
                b = fetch_20newsgroups(subset=split, remove=(), download_if_missing=not offline(),
                                       data_home=str(self.cache / "sklearn"))
            except OSError as e:
                raise ConfigError(f"sklearn could not fetch 20 Newsgroups ({e}); {OFFLINE_HINT}") from e
            out[split] = datasets.Dataset.from_dict({"text": list(b.data), "label": [int(y) for y in b.target]})
        return DatasetDict(out)

    def prepare_splits(self) -> DatasetDict:
        c = self.cfg
        ds = self.load_raw()
        if c.limit:
            # the files are sorted by label: a seeded shuffle first, so a slice still has every class
            ds = DatasetDict({k: v.shuffle(seed=c.seed).select(range(min(c.limit, len(v)))) for k, v in ds.items()})
        if c.remove:
            ds = ds.map(clean, batched=True, fn_kwargs={"remove": tuple(sorted(c.remove))}, desc="cleaning")
        try:
            parts = ds["train"].train_test_split(test_size=c.val_fraction, stratify_by_column="label", seed=c.seed)
        except ValueError as e:  # a class with a single post cannot be stratified
            warnings.warn(f"validation split not stratified ({e}); using a plain seeded split", stacklevel=2)
            parts = ds["train"].train_test_split(test_size=c.val_fraction, seed=c.seed)
        return DatasetDict(train=parts["train"], val=parts["test"], test=ds["test"])

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        datasets.disable_progress_bars()
        c, t0 = self.cfg, time.perf_counter()
        where = c.path if self.resolve_source() == "local" else c.source if c.source != "auto" else self.resolve_source()
        log.info("data: reading 20 Newsgroups (%s)%s", where, f", removing {', '.join(c.remove)}" if c.remove else "")
        splits = self.prepare_splits()
        key = {"train_fingerprint": fingerprint(splits["train"]), "model": c.tokenizer_model,
               "vocab_size": c.vocab_size, "lowercase": c.lowercase}
        log.info("data: %s", f"tokenizer {c.tokenizer}" if c.tokenizer else
                 f"the {c.tokenizer_model} tokenizer for {len(splits['train'])} training posts (trained once, then cached "
                 f"in {self.cache / 'tokenizers'})")
        tok, trained = get_tokenizer(c.tokenizer, lambda: splits["train"]["text"], self.cache / "tokenizers", key,
                                     c.tokenizer_model, c.vocab_size, c.lowercase, c.max_len)
        t1 = time.perf_counter()
        log.info("data: tokenizing %d posts", sum(len(v) for v in splits.values()))

        def encode(batch):
            return {"input_ids": [e.ids for e in tok.encode_batch(batch["text"])]}

        encoded = splits.map(encode, batched=True, remove_columns=["text"], desc="tokenizing")
        for k, v in encoded.items():  # [CLS] [SEP] alone: nothing left of any post
            if len(v) and max(len(ids) for ids in v["input_ids"]) <= 2:
                raise ConfigError(f"every post of the {k} split is empty"
                                  f"{' after data.remove=' + str(c.remove) if c.remove else ''}; nothing to learn from")
        self.timings = {"load_s": round(t1 - t0, 2), "tokenize_s": round(time.perf_counter() - t1, 2),
                        "tokenizer_trained": trained}
        self.encoder = TextEncoder("tokenizer", tok.to_str(), c.lowercase, c.max_len)
        if self.run_dir:
            write_whole(Path(self.run_dir) / layout.TOKENIZER, lambda tmp: tok.save(str(tmp)))
        self.vocab_size = tok.get_vocab_size()
        self.pad_id, self.mask_id = tok.token_to_id("[PAD]"), tok.token_to_id("[MASK]")
        specials = [tok.token_to_id(s) for s in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")]
        self.first_word_id = max(i for i in specials if i is not None) + 1
        self.splits = {k: [{"input_ids": ids, "label": y, "idx": i}
                           for i, (ids, y) in enumerate(zip(v["input_ids"], v["label"]))]
                       for k, v in encoded.items()}
