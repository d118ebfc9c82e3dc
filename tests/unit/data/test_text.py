"""data=text: 20 Newsgroups as one token stream cut into windows, bytes or a trained BPE, with
repeats planted in a stated fraction of the training windows only."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from attnexp.config import ConfigError
from attnexp.data import build_datamodule
from attnexp.data.text import with_repeats
from helpers.runs import run_of

NEWSGROUPS = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "20newsgroups"
needs_data = pytest.mark.skipif(not NEWSGROUPS.is_dir(), reason=f"the shared 20 Newsgroups copy is absent ({NEWSGROUPS})")


def text_module(tmp_path, *extra):
    run = run_of(["data=text", "data.limit=60", f"data.path={NEWSGROUPS}", f"paths.cache_dir={tmp_path}", *extra])
    dm = build_datamodule(run.data, run.task, causal=run.attention.causal)
    dm.setup()
    return run, dm


@needs_data
def test_windows_cut_the_byte_stream_of_whole_posts(tmp_path):
    run, dm = text_module(tmp_path, "data.max_len=64")
    assert dm.vocab_size == 261  # 256 bytes and 5 specials
    w = dm.windows["train"]
    assert w.shape[1] == 64 and w.dtype == torch.long
    text = dm.encoder.decode_text(w[:4].flatten().tolist())
    assert len(text) > 100 and "\ufffd" not in text  # whole posts: their bytes decode back to text
    cls = dm.encoder.tok.token_to_id("[CLS]")
    assert (w == cls).sum() >= 2  # posts are joined, each opened by [CLS]
    batch = next(iter(dm.train_dataloader()))
    assert batch["input_ids"].shape == (run.data.batch_size, 64) and batch["padded"] is False
    assert torch.equal(batch["labels"][:, :-1], batch["input_ids"][:, 1:])  # every next byte is a target


@needs_data
def test_a_trained_bpe_is_cached_and_read_back(tmp_path):
    _, dm = text_module(tmp_path, "data.tokenizer_model=bpe", "data.vocab_size=300")
    assert dm.vocab_size == 300
    _, again = text_module(tmp_path, "data.tokenizer_model=bpe", "data.vocab_size=300")
    assert torch.equal(dm.windows["val"], again.windows["val"])


@needs_data
def test_repeats_go_into_the_stated_share_of_training_windows_only(tmp_path):
    _, plain = text_module(tmp_path)
    _, rep = text_module(tmp_path, "data.repeat_fraction=0.5")
    assert torch.equal(plain.windows["val"], rep.windows["val"]) and torch.equal(plain.windows["test"], rep.windows["test"])
    changed = (plain.windows["train"] != rep.windows["train"]).any(1).float().mean().item()
    assert 0.35 < changed <= 0.55  # a repeat of a span equal to what was there already changes nothing


def test_each_repeat_copies_an_earlier_span_of_its_own_window():
    w = torch.arange(1000 * 32).view(1000, 32)  # distinct tokens: a copy can be found exactly
    out = with_repeats(w, 1.0, seed=0)
    for row, orig in zip(out, w):
        k = int((row != orig).sum())
        assert 8 <= k <= 16 and torch.equal(row[:-k], orig[:-k])  # only the end, a quarter to a half of the window
        start = int(row[-k] - orig[0])
        assert torch.equal(row[-k:], orig[start: start + k]) and start + k <= 32 - k  # an earlier span, before the repeat
    assert len({int(r[-1]) - int(o[0]) for r, o in zip(out, w)}) > 5  # distances vary: no fixed offset solves it


@pytest.mark.parametrize("overrides, says", [
    (["data=text", "task=classify"], "use task=lm"),
    (["data=text", "data.tokenizer_model=chars"], "bytes, bpe, wordpiece"),
    (["data=text", "data.repeat_fraction=1.5"], "must be in [0, 1]"),
    (["data=newsgroups", "data.tokenizer_model=bytes"], "wordpiece, bpe"),
])
def test_bad_settings_are_one_line(overrides, says):
    with pytest.raises(ConfigError, match=None) as e:
        run_of(overrides)
    assert says in str(e.value) and "\n" not in str(e.value)
