"""Training batches are tensor slices of a split held as one table (attnexp.data.table): for every
built-in data set and label kind they equal, bitwise, the batches the per-example collator made
from the same items in the same order, so a run's numbers are unchanged by the faster path."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from attnexp.data import build_datamodule
from helpers.runs import run_of

NEWSGROUPS = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "20newsgroups"

CASES = {
    "toy classify (varied lengths)": ["task=classify", "attention=bidirectional"],
    "toy causal lm": ["task=lm", "attention=causal"],
    "toy masked lm": ["task=lm", "attention=bidirectional"],
    "synthetic varied lengths": ["experiment=induction"],
    "synthetic fixed length, masked": ["experiment=copy", "attention=bidirectional"],
    "repeat": ["experiment=induction_heads", "data.n_train=300"],
    "toy, lengths rounded to 8": ["task=classify", "data.pad_to_multiple_of=8", "data.bucket=true"],
    "20 Newsgroups classify": ["data=newsgroups", "data.limit=200", "data.vocab_size=500",
                               f"data.path={NEWSGROUPS}"],
}


def reference(dm, split: str, keys: list) -> dict:
    """What the loader gave before the table: the collator over the items, each with its epoch."""
    items = [{**dm.splits[split][i], "epoch": e} for e, i in keys]
    return dm.collator(per_epoch=split == "train")(items)


@pytest.mark.parametrize("case", list(CASES))
def test_table_batches_equal_the_collators(case, tmp_path):
    overrides = CASES[case]
    if "data=newsgroups" in overrides and not NEWSGROUPS.is_dir():
        pytest.skip(f"the shared 20 Newsgroups copy is absent ({NEWSGROUPS})")
    run = run_of([*overrides, f"paths.cache_dir={tmp_path}"])
    dm = build_datamodule(run.data, run.task, causal=run.attention.causal, seed=3)
    dm.setup()
    for split, shuffle in (("train", True), ("val", False)):
        loader = dm._loader(split, shuffle)
        sampler = loader.batch_sampler
        for epoch in (0, 1):
            sampler.set_epoch(epoch)
            for n, (keys, batch) in enumerate(zip(sampler, loader)):
                want = reference(dm, split, keys)
                assert batch.keys() == want.keys()
                for k, v in want.items():
                    got = batch[k]
                    assert (torch.equal(got, v) if torch.is_tensor(v) else got == v), (case, split, epoch, n, k)
                if n == 6:
                    break


def test_a_batch_is_fetched_whole_not_item_by_item(monkeypatch):
    """torch's batched fetch: the sampler's list reaches the table in one call, no per-item fetch."""
    from attnexp.data.table import Table

    run = run_of(["experiment=induction"])
    dm = build_datamodule(run.data, run.task, causal=True)
    dm.setup()
    single, whole = [], []
    monkeypatch.setattr(Table, "__getitem__", lambda self, key: single.append(key))
    original = Table.__getitems__
    monkeypatch.setattr(Table, "__getitems__", lambda self, keys: whole.append(len(keys)) or original(self, keys))
    batch = next(iter(dm._loader("train", shuffle=True)))
    assert single == [] and whole == [run.data.batch_size] and batch["input_ids"].shape[0] == run.data.batch_size
