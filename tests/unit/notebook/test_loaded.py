"""The notebook's side (attnexp.notebook.loaded): a page shown inline runs in its own document, and
a checkpoint loaded for looking at reads its heads as a training run's snapshots do."""

from __future__ import annotations

import html

import pytest

from attnexp.api import load, load_run, train
from attnexp.config import ConfigError
from attnexp.notebook.loaded import Inline
from helpers.runs import compose_cfg


def test_an_inline_page_is_escaped_into_a_sandboxed_iframe():
    page = '<script>alert("x")</script><p title="a&b">it\'s</p>'
    shown = Inline(page, height=300)._repr_html_()
    assert shown.startswith('<iframe srcdoc="') and 'sandbox="allow-scripts"' in shown and "height:300px" in shown
    assert "<script>" not in shown and html.escape(page, quote=True) in shown


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    run = tmp_path_factory.mktemp("nb") / "run"
    s = train(load_run(compose_cfg(["trainer.max_epochs=1", "data.n_sentences=300", "logger=none", "maps.n_examples=2",
                                    "trainer.enable_progress_bar=false", "test=false"], run)))
    return s["checkpoints"]["last"]


def test_scores_are_the_reading_a_snapshot_takes(checkpoint):
    """load(ckpt).scores(text): every per-head quantity of heads.analysis.read_heads (the maps'
    statistics beside the pattern scores), each (layers, heads), and the roles."""
    from attnexp.heads import quantities

    m = load(checkpoint)
    got = m.scores("the dog sees the cat and the cat sees the dog near the big house .")
    assert {"entropy", "prev_token", "induction"} <= set(got)
    assert all(got[k].shape == (2, 4) for k in got if k in quantities.QUANTITIES)
    assert got["roles"].shape == (2, 4) and got["rollout"].ndim == 2


def test_showing_nothing_is_one_line(checkpoint):
    with pytest.raises(ConfigError, match="give at least one text"):
        load(checkpoint).show()
