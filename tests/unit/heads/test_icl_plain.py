"""Issue 66 item 1: with repeats planted in the validation windows (data=text, repeat_fraction > 0) the
probe's in-context score is read inside the planted copy. Every reading of a text run now also holds
`icl_plain`, the same score on the validation windows before anything was planted; with nothing
planted it is the probe's own score, and data with no plain text beside it has none."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from attnexp.heads import timeline as tl

NEWSGROUPS = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "20newsgroups"
needs_data = pytest.mark.skipif(not NEWSGROUPS.is_dir(), reason=f"the shared 20 Newsgroups copy is absent ({NEWSGROUPS})")
TINY = ["logger=none", "test=false", "trainer.enable_progress_bar=false", "trainer.max_steps=12", "maps.every_n_steps=4",
        "maps.animation=false", "model.n_layers=2", "model.d_model=32", "model.n_heads=2", "model.mlp=false"]


def timeline_of(tmp_path: Path, *overrides: str) -> tuple[tl.Timeline, list[dict]]:
    from attnexp.api import compose, load_run, train

    out = tmp_path / "run"
    train(load_run(compose([*TINY, *overrides], out)))
    lines = [json.loads(x) for x in (out / "maps" / tl.FILE).read_text().splitlines()[1:]]
    return tl.read(out / "maps" / tl.FILE), lines


@needs_data
@pytest.mark.parametrize("fraction", [0.5, 0.0])
def test_every_reading_of_a_text_run_holds_the_score_on_plain_windows(tmp_path, fraction):
    t, lines = timeline_of(tmp_path, "data=text", "data.limit=60", f"data.path={NEWSGROUPS}", "data.max_len=64",
                           f"data.repeat_fraction={fraction}", f"paths.cache_dir={tmp_path / 'cache'}")
    assert len(lines) >= 3 and all("icl_plain" in x for x in lines)
    plain, probe = t.scalar("icl_plain"), t.scalar("icl")
    assert np.isfinite(plain).all() and np.isfinite(probe).all()
    if fraction:  # other windows: another number at every reading
        assert not np.allclose(plain, probe)
    else:  # the probe is plain text: the same number
        assert np.allclose(plain, probe)


def test_a_run_with_no_plain_text_beside_its_probe_writes_no_plain_score(tmp_path):
    _, lines = timeline_of(tmp_path, "data.n_sentences=200", "task=lm", "attention=causal")
    assert lines and not any("icl_plain" in x for x in lines)
