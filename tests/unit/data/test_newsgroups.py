"""20 Newsgroups through `datasets` and `tokenizers`, on a slice of the shared bydate copy."""

from __future__ import annotations

import gzip
import json

import pytest

from attnexp.api import load_run, train
from attnexp.config import ConfigError, TaskConfig
from attnexp.data.configs import NewsgroupsDataConfig
from attnexp.data.newsgroups import NewsgroupsDataModule
from helpers.runs import SHARED, compose_cfg

DATA = SHARED / "data" / "20newsgroups"
pytestmark = pytest.mark.skipif(not (DATA / "train.jsonl.gz").is_file(), reason=f"needs the shared copy at {DATA}")
SLICE = ["data=newsgroups", "task=classify", "data.limit=300", "data.vocab_size=2000", "data.max_len=128",
         "data.batch_size=16"]


def module(tmp_path, causal=False, **kw) -> NewsgroupsDataModule:
    kw = {"max_len": 128, **kw}
    cfg = NewsgroupsDataConfig(path=str(DATA), cache_dir=str(tmp_path / "cache"), limit=300, vocab_size=2000, **kw)
    return NewsgroupsDataModule(cfg, TaskConfig(name="classify", pooling="mean"), causal=causal,
                                run_dir=str(tmp_path))


def test_pipeline_splits_tokenizes_and_caches(tmp_path):
    dm = module(tmp_path)
    dm.setup()
    n = {k: len(v) for k, v in dm.splits.items()}
    assert n == {"train": 270, "val": 30, "test": 300}
    assert len({it["label"] for it in dm.splits["val"]}) >= 15  # stratified: most classes in 30 posts
    assert dm.num_classes == 20 and dm.vocab_size == 2000 and dm.timings["tokenizer_trained"]
    assert (tmp_path / "tokenizer.json").is_file()
    first = dm.decode(dm.splits["train"][0]["input_ids"])
    assert first[0] == "[CLS]" and first[-1] == "[SEP]" and len(first) <= 128
    again = module(tmp_path)
    again.setup()  # same settings: tokenizer and datasets' map() both come from the cache
    assert not again.timings["tokenizer_trained"]
    assert again.splits["train"][5]["input_ids"] == dm.splits["train"][5]["input_ids"]
    assert again.timings["tokenize_s"] < max(0.5, dm.timings["tokenize_s"])


def test_length_buckets_pad_less_than_random_batches(tmp_path):
    def padding(dm):
        total = real = 0
        for b in dm.train_dataloader():
            total += b["pad_mask"].numel()
            real += int(b["pad_mask"].sum())
        return 1 - real / total

    # posts run from ~50 to thousands of tokens: with a 1024 cap, random batches pad a lot
    bucketed, shuffled = module(tmp_path, bucket=True, max_len=1024), module(tmp_path, bucket=False, max_len=1024)
    bucketed.setup(), shuffled.setup()
    assert padding(bucketed) < 0.5 * padding(shuffled)
    assert sorted(i for b in bucketed.train_dataloader().batch_sampler for _, i in b) == list(range(270))


def test_remove_headers_footers_quotes(tmp_path):
    raw, clean = module(tmp_path), module(tmp_path, remove=["headers", "footers", "quotes"])
    raw.setup(), clean.setup()
    raw_text = " ".join(raw.decode(raw.splits["train"][0]["input_ids"]))
    clean_text = " ".join(clean.decode(clean.splits["train"][0]["input_ids"]))
    assert raw_text.startswith("[CLS] from :") and not clean_text.startswith("[CLS] from :")


@pytest.mark.parametrize("mask", ["causal", "bidirectional"])
def test_classifier_trains_on_the_slice(mask, tmp_path):
    cfg = compose_cfg([*SLICE, f"attention={mask}", "trainer.fast_dev_run=true", "logger=none",
                       "trainer.enable_progress_bar=false", f"data.cache_dir={tmp_path / 'cache'}"], tmp_path)
    s = train(load_run(cfg))
    assert s["status"] == "completed" and s["task"]["pooling"] == ("last" if mask == "causal" else "cls")
    assert s["data"]["num_classes"] == 20


def test_local_csv_and_a_given_tokenizer_json(tmp_path):
    folder = tmp_path / "csv"
    folder.mkdir()
    rows = [json.loads(line) for line in gzip.open(DATA / "test.jsonl.gz", "rt").readlines()[::300]]
    for split in ("train", "test"):
        with open(folder / f"{split}.csv", "w") as f:
            import csv

            w = csv.writer(f)
            w.writerow(["text", "label"])
            w.writerows([[r["text"], r["label"]] for r in rows])
    first = module(tmp_path)
    first.setup()
    cfg = NewsgroupsDataConfig(source="local", path=str(folder), cache_dir=str(tmp_path / "c2"), val_fraction=0.2,
                               tokenizer=str(tmp_path / "tokenizer.json"), max_len=64)
    dm = NewsgroupsDataModule(cfg, TaskConfig(name="classify"), causal=False)
    with pytest.warns(UserWarning, match="not stratified"):  # 26 posts: some classes have one
        dm.setup()
    assert dm.vocab_size == 2000 and len(dm.splits["test"]) == len(rows)


def test_offline_sources_fail_fast_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for source in ("hub", "sklearn"):
        cfg = NewsgroupsDataConfig(source=source, cache_dir=str(tmp_path))
        dm = NewsgroupsDataModule(cfg, TaskConfig(name="classify"), False)
        with pytest.raises(ConfigError, match="data.source=local data.path=DIR"):
            dm.setup()
    with pytest.raises(ConfigError, match="no such folder"):
        load_run(compose_cfg(["data=newsgroups", "task=classify", "data.source=local", "data.path=/nope"]))
    with pytest.raises(ConfigError, match="allowed: headers, footers, quotes"):
        load_run(compose_cfg(["data=newsgroups", "task=classify", "data.remove=[signature]"]))


@pytest.mark.parametrize("data", ["newsgroups", "text"])
def test_a_folder_of_ones_own_that_is_not_there_is_said_not_replaced_by_a_download(data, tmp_path):
    """source=auto: before, data.path=/a/typo fell through to sklearn's download, which trained on other
    data than the folder named (online) or failed naming the network (offline)."""
    with pytest.raises(ConfigError, match=r"data.path='/no/such/copy': no such folder; .* data.source=sklearn or hub"):
        load_run(compose_cfg([f"data={data}", "data.path=/no/such/copy"], tmp_path))


TRAIN_ONCE = """
import sys
from attnexp.config import TaskConfig
from attnexp.data.configs import NewsgroupsDataConfig
from attnexp.data.newsgroups import NewsgroupsDataModule
cfg = NewsgroupsDataConfig(source="local", path=sys.argv[1], limit=800, vocab_size=2000, max_len=64,
                           cache_dir=sys.argv[2])
NewsgroupsDataModule(cfg, TaskConfig(name="classify"), False, run_dir=sys.argv[3]).setup()
"""


@pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data/20newsgroups is absent")
def test_the_tokenizer_trains_the_same_file_twice_in_fresh_caches(tmp_path):
    """tokenizers' WordPiece trainer gave another vocabulary in each process (huggingface/tokenizers
    #1794): the same command on a fresh machine trained another model. Two trainings, each in its
    own process and cache, must write the same tokenizer.json byte for byte."""
    import subprocess
    import sys

    files = []
    for i in range(2):
        run = tmp_path / f"run{i}"
        run.mkdir()
        r = subprocess.run([sys.executable, "-c", TRAIN_ONCE, str(DATA), str(tmp_path / f"cache{i}"), str(run)],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        files.append((run / "tokenizer.json").read_bytes())
    assert files[0] == files[1]
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(files[0].decode())
    assert not [t for t in tok.get_added_tokens_decoder().values() if t.content.startswith("##")]
    enc = tok.encode("unbelievably transcendental")
    assert any(t.startswith("##") for t in enc.tokens) and "[UNK]" not in enc.tokens
    assert tok.decode(enc.ids) == "unbelievably transcendental"


@pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data/20newsgroups is absent")
def test_data_preparation_is_announced(tmp_path, caplog):
    """Before: minutes of silence while 20 Newsgroups was read, a tokenizer trained and posts tokenized."""
    import logging

    from attnexp.config import TaskConfig

    cfg = NewsgroupsDataConfig(source="local", path=str(DATA), limit=100, vocab_size=500, max_len=64,
                               cache_dir=str(tmp_path))
    with caplog.at_level(logging.INFO, logger="attnexp"):
        NewsgroupsDataModule(cfg, TaskConfig(name="classify"), False).setup()
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("data: ")]
    assert said[0] == f"data: reading 20 Newsgroups ({DATA})"
    assert said[1].startswith("data: the wordpiece tokenizer for 90 training posts") and said[2] == "data: tokenizing 200 posts"
