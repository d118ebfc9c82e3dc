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
def test_repeats_go_into_the_stated_share_of_training_and_validation_windows(tmp_path):
    _, plain = text_module(tmp_path)
    _, rep = text_module(tmp_path, "data.repeat_fraction=0.5")
    assert torch.equal(plain.windows["test"], rep.windows["test"])  # the test split stays plain text
    for split in ("train", "val"):
        changed = (plain.windows[split] != rep.windows[split]).any(1).float().mean().item()
        assert 0.35 < changed <= 0.6, split  # a repeat of a span equal to what was there already changes nothing


def test_each_repeat_copies_an_earlier_span_of_its_own_window():
    """The last k tokens (T/4 to T/2) repeat an earlier span of the same window, from a drawn place, so
    the distance is not fixed (a head looking a fixed way back cannot solve it)."""
    w = torch.arange(1000 * 32).view(1000, 32)  # distinct tokens: a copy can be found exactly
    out = with_repeats(w, 1.0, seed=0)
    distances = set()
    for row, orig in zip(out, w):
        k = int((row != orig).sum())
        assert 8 <= k <= 16 and torch.equal(row[:-k], orig[:-k])  # only the end, a quarter to a half of the window
        start = int(row[-k] - orig[0])
        assert torch.equal(row[-k:], orig[start: start + k]) and start + k <= 32 - k  # an earlier span, before the repeat
        distances.add(32 - k - start)
    assert len(distances) > 5  # distances vary: no fixed offset solves it


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


@needs_data
def test_the_induction_probe_draws_from_the_tokens_the_data_uses(tmp_path):
    """Issue 53: the heads' induction probe drew its random tokens from all 256 bytes, most of which a
    byte-level model never saw; a model whose layer-1 head copied text (induction score 0.82 on
    repeated printable characters) scored 0.04 there. The probe now draws from the tokens that make up
    at least 1e-4 of the training tokens."""
    from attnexp.heads import analysis, roles

    _, dm = text_module(tmp_path)
    pool = dm.frequent_tokens()
    tok = dm.encoder.tok
    e, nul = tok.encode("e").ids[1], tok.token_to_id("Ā")  # 'e'; byte 0x00 (ByteLevel's character for it)
    assert e in pool and nul not in pool and 40 < len(pool) < 200
    ids = analysis.induction_input(2, dm.first_word_id, dm.vocab_size, 128, pool=pool)
    control = roles.induction_control(ids, dm.first_word_id, dm.vocab_size, pool=pool)
    assert set(ids[1:]) <= set(pool) and set(control[1:]) <= set(pool) and len(ids) == 1 + 2 * 50
