"""The local learning coefficient over training (attnexp.heads.llc, maps.llc=true): its stages cut
at the critical points with an absolute gate, its place in the timeline file, devinterp's estimate
leaving the model and the run's random streams as they were, and the calibration's choice being the
defaults."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from attnexp.config import MapsConfig
from attnexp.heads import llc
from attnexp.heads import timeline as tl

REPO = Path(__file__).resolve().parents[3]


def test_stages_are_cut_where_the_llc_turns_and_not_on_its_noise():
    rng = np.random.default_rng(0)
    steps = np.arange(0, 1600, 100)
    rise_fall_rise = np.concatenate([np.linspace(5, 25, 6), np.linspace(25, 12, 5)[1:], np.linspace(12, 30, 7)[1:]])
    found = llc.stages(steps, rise_fall_rise + rng.normal(0, 0.3, len(steps)))
    assert [s.kind for s in found] == ["rise", "fall", "rise"]
    assert [s.start for s in found[1:]] == [500, 900]  # the peak and the trough, at the readings they were planted
    flat = 10 + rng.normal(0, 0.5, len(steps))  # drift below the gate: one plateau, no boundary
    assert [s.kind for s in llc.stages(steps, flat)] == ["plateau"]
    with_gaps = rise_fall_rise.copy()
    with_gaps[::2] = np.nan  # readings without an estimate are left out
    assert all(s.start % 200 == 100 for s in llc.stages(steps, with_gaps))


def test_the_llc_is_a_scalar_of_the_readings_where_it_was_estimated(tmp_path):
    w = tl.Writer(tmp_path / tl.FILE)
    w.start(None)
    for step, value in ((0, None), (10, 4.5), (20, None), (30, 7.25)):
        w.append(tl.Reading(step, 0, {"induction": np.zeros((1, 2))}, loss=1.0, llc=value,
                            llc_std=None if value is None else 0.1))
    lines = w.path.read_text().splitlines()
    assert '"llc"' not in lines[1] and '"llc":4.5' in lines[2]  # the keys only where it was estimated
    t = tl.read(w.path)
    assert np.isnan(t.scalar("llc")[[0, 2]]).all() and t.scalar("llc")[[1, 3]].tolist() == [4.5, 7.25]
    bad = w.path.read_text().replace('"llc":4.5', '"llc":"lots"')
    w.path.write_text(bad)
    with pytest.raises(tl.TimelineError, match="line 3 is not a reading"):
        tl.read(w.path)


def test_the_llc_readings_are_a_subset_of_the_timelines_after_step_zero():
    schedule = tl.schedule(1500, 64, every_n_steps=25)
    got = llc.steps_of(schedule, 16)
    assert len(got) == 16 and set(got) <= set(schedule) and got[0] == 25 and got[-1] == 1500
    assert llc.steps_of([0, 5], 16) == [5] and llc.steps_of(schedule, 0) == []


def test_the_llc_changes_are_run_level_changes_named_llc():
    t = tl.Timeline(1, 1, [tl.Reading(s, 0, {"x": np.zeros((1, 1))}, llc=v)
                           for s, v in zip(range(0, 1100, 100), [np.nan, 5, 10, 15, 20, 20.2, 20.1, 20, 14, 8, 2])])
    moved = llc.changes(t)
    assert [(c.name, c.step) for c in moved] == [("llc", 400), ("llc", 700)]
    assert moved[0].interval == (300, 500)  # the LLC readings either side: the resolution the estimates give


devinterp = pytest.importorskip("devinterp", reason="the LLC needs devinterp: pip install 'attnexp[llc]'")


def test_an_estimate_leaves_the_model_and_the_runs_random_streams_as_they_were():
    import torch

    from attnexp.config.model import AttentionConfig, ModelConfig
    from attnexp.model.transformer import Transformer

    torch.manual_seed(0)
    m = ModelConfig(n_layers=1, d_model=16, n_heads=2, mlp=False, max_len=16)
    from attnexp import attention

    model = Transformer(m, attention.validate(AttentionConfig(), m), 11).eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    ids = torch.randint(0, 11, (64, 9))
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    expected = random.random(), np.random.rand(), torch.rand(1).item()
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    e = llc.estimate(model, ids, llc.Settings(1e-3, 10.0, 100.0, 2, 20, 16), seed=0)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items()) and not model.training
    assert np.isfinite(e.value) and e.std >= 0
    again = llc.estimate(model, ids, llc.Settings(1e-3, 10.0, 100.0, 2, 20, 16), seed=0)
    assert again.value == pytest.approx(e.value, abs=1e-6)  # one seed: the same chains


def test_the_defaults_are_the_calibrations_choice():
    f = REPO / "scripts" / "results" / "llc_calibration_cpu.json"
    choice = json.loads(f.read_text())["choice"]
    d = MapsConfig()
    assert (d.llc_lr, d.llc_nbeta, d.llc_localization, d.llc_chains, d.llc_draws) == \
        (choice["lr"], choice["nbeta"], choice["localization"], choice["chains"], choice["draws"])


def test_the_viewers_strip_draws_the_llc_and_its_critical_points(tmp_path):
    """maps.llc: the viewer's strip gets a panel of the LLC where it was estimated, its critical points
    dashed; what was drawn is said in the canvas's aria-label (read in Chromium)."""
    import re

    from attnexp.maps.html import Viewer, timeline_data
    from helpers.browser import CHROMIUM, dump_dom

    if CHROMIUM is None:
        pytest.skip("needs Debian's chromium (apt-get install chromium); .ci/run installs it")
    values = [np.nan, 5, 10, 15, 20, 20.2, 20.1, 20, 14, 8, 2]
    t = tl.Timeline(1, 1, [tl.Reading(s, 0, {"induction": np.zeros((1, 1))}, loss=1.0, llc=None if v != v else v)
                           for s, v in zip(range(0, 1100, 100), values)])
    moved = llc.changes(t)
    data = timeline_data(t, [], ("induction",), moved)
    assert data["stages"] == [400, 700] and data["llc"][0] is None and data["llc"][4] == 20.0
    v = Viewer([["a", "b"]], 64)
    v.add(-1, np.full((1, 1, 1, 2, 2), 0.5, dtype=np.float32))
    page = tmp_path / "viewer.html"
    v.write(page, "t", layers=1, heads=1, timeline=data)
    label = re.search(r'aria-label="(heads timeline[^"]*)"', dump_dom(page)).group(1)
    assert "the LLC at 10 readings, 2 critical points" in label


def test_without_change_points_the_llc_is_kept_and_its_stages_are_not_searched(tmp_path, monkeypatch):
    """maps.llc=true with maps.change_points=false (or without ruptures): the estimates are summed up in
    summary.json, and no stage search runs (it needs ruptures: the end of the run raised ImportError)."""
    from types import SimpleNamespace

    from attnexp.config import MapsConfig
    from attnexp.training.maps_callback import AttentionMaps

    cb = AttentionMaps(MapsConfig(change_points=False, llc=True), tmp_path)
    cb._writer = tl.Writer(tmp_path / "maps" / tl.FILE)
    cb._writer.start(None)
    for s, v in ((0, None), (10, 4.0), (20, 9.0)):
        cb._writer.append(tl.Reading(s, 0, {"induction": np.zeros((1, 1))}, loss=1.0, llc=v))
    cb._llc = SimpleNamespace(summary=lambda: {"estimates": 2})
    monkeypatch.setattr(llc, "stages", lambda *a: (_ for _ in ()).throw(ImportError("ruptures")))
    cb.finish_timeline(None)
    cb._drawer.collect(wait=True)
    assert cb.timeline_summary["llc"] == {"estimates": 2}
    assert cb.timeline_summary["change_points_skipped"] == "maps.change_points=false"
