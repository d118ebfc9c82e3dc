"""A new per-head statistic is one function in a module of its own (heads.quantities): written in a
temporary module and imported, with no other edit it is logged as scalars and a histogram, saved in
every snapshot, drawn in the report and shown in the viewer, for every epoch of a resumed run too, and
returned by `attnexp maps` and the notebook (`load(ckpt).scores()` / `.show()`), which read the heads
through the same function (heads.analysis.read_heads)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attnexp.api import load_run, train
from attnexp.heads import quantities
from helpers.runs import compose_cfg
from helpers.throwaway import imported

STATISTIC = '''
import numpy as np

from attnexp.heads.quantities import statistic


@statistic("throwaway_peak", "largest share of a row (a test's statistic)", "peakier rows")
def peak(m):
    return m.mean(m.shares.max(-1))
'''
QUICK = ["trainer.enable_progress_bar=false", "data.n_sentences=400", "maps.n_examples=2", "logger=tensorboard",
         "maps.animation=false", "test=false"]


@pytest.fixture
def throwaway(tmp_path):
    with imported(tmp_path, "throwaway_statistic", STATISTIC, quantities.QUANTITIES) as module:
        yield module.peak


def viewer_data(page: str) -> dict:
    start = page.index("const D = ") + len("const D = ")
    return json.loads(page[start:page.index(";\n", start)])


def test_a_statistic_in_a_module_of_its_own_is_shown_everywhere(throwaway, tmp_path, capsys):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from attnexp.cli import main
    from attnexp.maps import snapshot

    run = tmp_path / "run"
    first = train(load_run(compose_cfg([*QUICK, "trainer.max_epochs=1"], run)))
    train(load_run(compose_cfg([*QUICK, "trainer.max_epochs=2", f"resume={first['checkpoints']['last']}"], run)))

    ev = EventAccumulator(str(run / "tensorboard"), size_guidance={"scalars": 0, "histograms": 0}).Reload()
    assert {"attn/L0/throwaway_peak", "attn/L1/throwaway_peak"} <= set(ev.Tags()["scalars"])
    assert "heads/throwaway_peak" in ev.Tags()["histograms"]
    for epoch in range(2):
        snap = snapshot.read(run / "maps" / f"epoch{epoch:03d}.npz", weights=True)
        w = snap.weights.astype(float)
        want = throwaway(quantities.Maps(w, np.load(run / "maps" / f"epoch{epoch:03d}.npz")["lengths"]))
        np.testing.assert_allclose(snap.analysis.scores["throwaway_peak"], want, atol=2e-3)  # the saved maps are fp16

    data = viewer_data((run / "maps" / "viewer.html").read_text())
    assert data["epochs"] == [-1, 0, 1]  # the start, the first part's epoch and the resumed one
    assert data["labels"]["throwaway_peak"] == "largest share of a row (a test's statistic)"
    assert all(len(a["scores"]["throwaway_peak"]) == 2 * 4 for a in data["analysis"])  # every epoch, resumed ones too

    assert main(["compare", str(tmp_path), f"report={tmp_path / 'report.html'}"]) == 0
    assert "largest share of a row (a test&#x27;s statistic)" in (tmp_path / "report.html").read_text()

    from attnexp.api import load

    last, text = run / "checkpoints" / "last.ckpt", "the dog sees the cat and the cat sees the dog near the big house ."
    assert main(["maps", f"ckpt={last}", f"text={text}"]) == 0
    assert snapshot.read(run / "maps" / "custom_last" / "maps.npz").analysis.scores["throwaway_peak"].shape == (2, 4)
    got = load(last).scores(text)  # the notebook: every number the training viewer shows (it gave 8 of 17)
    assert got["throwaway_peak"].shape == (2, 4)
    trained = set(data["analysis"][-1]["scores"])
    assert trained - set(got) <= {"drift", "importance", "importance_acc"}, trained - set(got)  # start maps, labels
    assert "throwaway_peak" in viewer_data(load(last).viewer_html([text]))["analysis"][0]["scores"]


def test_every_per_head_number_is_declared_once():
    """What the analysis computes is declared (or a resumed run's viewer would drop it), and a name
    is declared by one function only."""
    from attnexp.heads import roles

    analysed = {*roles.SCORES, "induction", "prev_token_rep", "importance", "importance_acc"}
    assert analysed <= set(quantities.QUANTITIES)
    assert {q.name for q in quantities.QUANTITIES.values() if q.kind in quantities.ANALYSED} == analysed
    with pytest.raises(ValueError, match="'entropy' is declared twice"):
        quantities.statistic("entropy", "again", "more")(lambda m: None)
    members = [q.member for q in quantities.QUANTITIES.values()]
    assert len(members) == len(set(members))
