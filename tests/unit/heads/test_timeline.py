"""The heads timeline (attnexp.heads.timeline): the step schedule, the file as a stranger's file
(torn last line, wrong shapes, past its limits), a resumed run's file, and change points found at
the steps they were planted at, with a slow drift and noise left alone."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attnexp.heads import changes as ch
from attnexp.heads import timeline as tl


def test_the_log_schedule_is_dense_early_and_ends_at_the_last_step():
    s = tl.schedule(1000, 40)
    assert s[:6] == [0, 1, 2, 3, 4, 5] and s[-1] == 1000 and s == sorted(set(s))
    assert 25 <= len(s) <= 41
    assert sum(1 for x in s if x <= 100) > sum(1 for x in s if x > 100)  # dense where heads form
    assert tl.schedule(95, 40, every_n_steps=10) == [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95]
    assert len(tl.schedule(10**8, 40, every_n_steps=1)) == tl.MAX_READINGS


def reading(step, L=2, H=3, value=0.0, **kw):
    return tl.Reading(step, 0, {"induction": np.full((L, H), value), "prev_token": np.full((L, H), 0.1)}, **kw)


def test_a_timeline_written_and_read_back_and_a_torn_last_line_left_out(tmp_path):
    w = tl.Writer(tmp_path / tl.FILE)
    w.start(None)
    for k, step in enumerate([0, 1, 5, 9]):
        w.append(reading(step, value=k / 10, loss=2.0 - k / 10, icl=None if step == 0 else -0.1 * k))
    with open(w.path, "a") as f:
        f.write('{"step":12,"epoch":0,"values":{"induct')  # a run killed mid-line
    t = tl.read(w.path)
    assert t.steps.tolist() == [0, 1, 5, 9] and (t.layers, t.heads) == (2, 3)
    assert t.curve("induction").shape == (4, 2, 3) and t.curve("induction")[2, 1, 2] == pytest.approx(0.2)
    assert np.isnan(t.scalar("icl")[0]) and t.scalar("loss")[3] == pytest.approx(1.7)
    assert t.curve("absent") is None


def test_a_resumed_run_keeps_the_readings_its_checkpoint_had_and_drops_the_rest(tmp_path):
    w = tl.Writer(tmp_path / tl.FILE)
    w.start(None)
    for step in (0, 1, 2, 4, 8, 16):
        w.append(reading(step))
    w2 = tl.Writer(tmp_path / tl.FILE)
    w2.start(keep_through=4)  # the checkpoint was at step 4 (or past it, before the reading at 8)
    w2.append(reading(8, value=0.5))
    t = tl.read(w2.path)
    assert t.steps.tolist() == [0, 1, 2, 4, 8] and t.curve("induction")[-1, 0, 0] == 0.5
    tl.Writer(tmp_path / tl.FILE).start(None)  # a fresh run in the same folder starts again
    assert not (tmp_path / tl.FILE).exists()


def test_the_header_gives_the_maps_sizes_not_the_configs(tmp_path):
    """single_head and dot_product give one map a layer whatever model.n_heads says (CI's slow set
    failed on them when the header took model.n_heads)."""
    w = tl.Writer(tmp_path / tl.FILE)
    w.start(None)
    w.append(reading(0, L=2, H=1))
    w.append(reading(3, L=2, H=1, value=0.4))
    t = tl.read(w.path)
    assert (t.layers, t.heads) == (2, 1) and t.curve("induction").shape == (2, 2, 1)
    w2 = tl.Writer(tmp_path / tl.FILE)
    w2.start(keep_through=3)  # resumed with other sizes (another model in the run's folder): started again
    w2.append(reading(5, L=2, H=4))
    t = tl.read(w2.path)
    assert (t.layers, t.heads) == (2, 4) and t.steps.tolist() == [5]


@pytest.mark.parametrize("content, says", [
    ("not json\n", "not an attnexp timeline"),
    ('{"attnexp_timeline": 1, "layers": 100, "heads": 100}\n', "at most 4096 heads"),
    ('{"attnexp_timeline": 1, "layers": 2, "heads": 3}\n{"step": 0}\n', "line 2 is not a reading"),
    ('{"attnexp_timeline": 1, "layers": 2, "heads": 3}\n{"step":0,"epoch":0,"values":{"x":[[1,2],[3,4]]}}\n',
     "x is not 2 x 3 finite numbers"),
    ('{"attnexp_timeline": 1, "layers": 1, "heads": 1}\n{"step":0,"epoch":0,"values":{"x":[[NaN]]}}\n',
     "x is not 1 x 1 finite numbers"),
    ('{"attnexp_timeline": 1, "layers": 1, "heads": 1}\n{"step":5,"epoch":0,"values":{}}\n{"step":5,"epoch":0,"values":{}}\n',
     "steps do not increase"),
])
def test_a_strangers_timeline_is_refused_in_one_line(tmp_path, content, says):
    path = tmp_path / tl.FILE
    path.write_text(content)
    with pytest.raises(tl.TimelineError, match=says) as e:
        tl.read(path)
    assert "\n" not in str(e.value)


def test_a_timeline_past_its_size_is_not_read(tmp_path, monkeypatch):
    path = tmp_path / tl.FILE
    path.write_text(json.dumps({"attnexp_timeline": 1, "layers": 1, "heads": 1}) + "\n" + "x" * 2000)
    monkeypatch.setattr(tl, "MAX_BYTES", 1000)
    with pytest.raises(tl.TimelineError, match="past the 1,000 a timeline may hold"):
        tl.read(path)


def planted(tmp_path, steps, curves: dict[tuple[int, int], np.ndarray], loss=None):
    """A timeline of 2 x 2 heads whose induction scores are `curves` (others flat at 0.05 + noise)."""
    rng = np.random.default_rng(0)
    w = tl.Writer(tmp_path / tl.FILE)
    w.start(None)
    for k, step in enumerate(steps):
        ind = 0.05 + 0.02 * rng.standard_normal((2, 2))
        for (layer, head), c in curves.items():
            ind[layer, head] = c[k]
        w.append(tl.Reading(int(step), 0, {"induction": ind, "prev_token": 0.1 + 0.02 * rng.standard_normal((2, 2))},
                            loss=None if loss is None else float(loss[k])))
    return tl.read(w.path)


@pytest.mark.parametrize("at", [17, 30, 48])
def test_change_points_are_found_where_they_were_planted(tmp_path, at):
    """An induction head planted to form between two readings (a rise from ~0.05 to ~0.7 over one
    reading, noise 0.03) is found there, with that interval; a slow drift of another head to 0.35
    and the flat noisy heads are not formations; the loss's drop at the same reading is a change."""
    pytest.importorskip("ruptures", reason="change points need ruptures: pip install 'attnexp[timeline]'")
    steps = np.array(tl.schedule(2000, 64))
    n = len(steps)
    rng = np.random.default_rng(1)
    jump = np.where(np.arange(n) >= at, 0.7, 0.05) + 0.03 * rng.standard_normal(n)
    drift = np.linspace(0.0, 0.35, n) + 0.03 * rng.standard_normal(n)
    loss = np.where(np.arange(n) >= at, 0.5, 3.6) + 0.05 * rng.standard_normal(n)
    t = planted(tmp_path, steps, {(1, 0): jump, (0, 1): drift}, loss=loss)
    formed = ch.formations(t)
    assert [(f.layer, f.head, f.role) for f in formed] == [(1, 0, "induction")], [f.line() for f in formed]
    f = formed[0]
    assert f.step == steps[at] and f.interval == (steps[at - 1], steps[at])
    assert f.before < 0.15 and f.after > 0.6
    assert f"L1 H0 became an induction head at step {steps[at]}" in f.line()
    (c,) = [c for c in ch.changes(t) if c.name == "loss"]
    assert c.step == steps[at] and c.before > 3 and c.after < 1


def test_a_flat_curves_wiggles_are_not_change_points(tmp_path):
    """A 1-layer control's loss: flat but for steps of 0.1-0.2 nats (a quarter of its own small range
    and more). Gated by the range alone, each step was reported as a change; the absolute gate
    (MIN_CHANGE_NATS) reports none, and a real 0.5-nat fall beside them is still found."""
    pytest.importorskip("ruptures", reason="change points need ruptures: pip install 'attnexp[timeline]'")
    steps = np.array(tl.schedule(2000, 64))
    n = len(steps)
    rng = np.random.default_rng(2)
    wiggle = 4.0 + np.where(np.arange(n) % 30 < 15, 0.0, 0.15) + 0.01 * rng.standard_normal(n)
    assert ch.changes(planted(tmp_path, steps, {}, loss=wiggle), min_nats=0.0)  # the old gate saw changes
    assert ch.changes(planted(tmp_path, steps, {}, loss=wiggle)) == []
    fall = wiggle - np.where(np.arange(n) >= 40, 0.5, 0.0)
    (c,) = ch.changes(planted(tmp_path, steps, {}, loss=fall))
    assert c.step == steps[40] and c.before - c.after > 0.45


def test_only_curves_that_could_form_a_role_are_searched_for_change_points(tmp_path, monkeypatch):
    """A run's end searched every head x role curve with PELT (75 searches, 2 s of a 15 s toy run);
    one that never reaches the role's threshold, or never moves by MIN_RISE, cannot hold a formation,
    so it is skipped, and the formations are the same (checked on 30 real timelines: 12x faster)."""
    pytest.importorskip("ruptures", reason="change points need ruptures: pip install 'attnexp[timeline]'")
    steps = np.array(tl.schedule(2000, 64))
    n = len(steps)
    jump = np.where(np.arange(n) >= 30, 0.7, 0.05) + 0.03 * np.random.default_rng(1).standard_normal(n)
    t = planted(tmp_path, steps, {(1, 0): jump})
    searched = []
    real = ch.breakpoints
    monkeypatch.setattr(ch, "breakpoints", lambda x, penalty=None: searched.append(1) or real(x, penalty))
    formed = ch.formations(t)
    assert [(f.layer, f.head, f.role) for f in formed] == [(1, 0, "induction")]
    assert len(searched) == 1  # before: every head of every role with a curve (2 x 2 x 2 here)


def test_without_ruptures_change_points_say_how_to_get_it(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_ruptures(name, *a, **kw):
        if name == "ruptures":
            raise ImportError(name)
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_ruptures)
    with pytest.raises(ImportError, match=r"pip install 'attnexp\[timeline\]'"):
        ch.breakpoints(np.arange(10.0))


def test_the_in_context_score_is_late_minus_early_loss():
    loss = np.zeros((2, 15))
    loss[0, :4], loss[0, 8:12] = 3.0, 1.0  # example 0: 13 positions -> quarters of 3
    loss[1, :3], loss[1, 9:12] = 2.0, 2.0  # example 1: 13 tokens, 12 positions -> quarters of 3
    assert tl.icl_score(loss, [13, 13]) == pytest.approx(((1 + 2) / 2) - ((3 + 2) / 2))
    assert tl.icl_score(loss, [3, 2]) is None  # too short for a quarter


def test_formations_reach_the_end_of_run_block_and_compare(tmp_path, capsys):
    """summary.json's attention_maps.timeline (written by the maps callback) is said in the run's
    last lines and in `attnexp compare`: each run's first formations, and for groups of seeds the
    step of the first induction head, mean +- std and how many runs formed one."""
    from attnexp.cli.compare import compare_cli
    from attnexp.results.ending import end_of_run

    def summary(run: str, seed: int, variant: str, steps: list[int]) -> dict:
        formed = [{"layer": 1, "head": 0, "role": "induction", "quantity": "induction", "step": st,
                   "interval": [st - 10, st], "before": 0.05, "after": 0.7} for st in steps]
        formed.insert(0, {"layer": 0, "head": 2, "role": "previous", "quantity": "prev_token", "step": 40,
                          "interval": [30, 40], "before": 0.1, "after": 0.8})
        d = tmp_path / run
        d.mkdir()
        s = {"schema": 2, "status": "completed", "run_dir": str(d), "seed": seed, "overrides": [f"attention={variant}",
             f"seed={seed}"], "metrics": {"best": {"monitor": "val/loss", "value": 1.0 + seed / 10, "checkpoint": ""},
                                           "test": {}, "final": {}},
             "attention_maps": {"dir": str(d / "maps"), "timeline": {"file": str(d / "maps" / tl.FILE), "readings": 60,
                                                                      "steps": [0, 900], "formations": formed,
                                                                      "changes": []}}}
        (d / "summary.json").write_text(json.dumps(s))
        return s

    runs = [summary(f"{v}{seed}", seed, v, steps) for v, base in (("rotary", 400), ("alibi", 250))
            for seed, steps in enumerate([[base], [base + 40], []])]
    block = end_of_run(runs[0])
    assert ("  heads    formed: L0 H2 previous-token head at step 40, L1 H0 induction head at step 400 · 60 readings · "
            "maps/timeline.png") in block
    assert compare_cli([str(tmp_path)]) == 0  # runs that differ only in seed: grouped, and each run below
    out = capsys.readouterr().out
    assert "heads formed" in out and "previous 40 · induction 400" in out
    assert "induction step" in out and "420 ± 28 (2 formed)" in out and "270 ± 28 (2 formed)" in out


def test_the_viewer_draws_the_timeline_and_a_strangers_names_stay_text(tmp_path):
    """viewer.html gets the heads timeline under the maps (strips of heads x readings, formations
    outlined, the loss and in-context score), drawn on a canvas in a real browser; a quantity name
    from a stranger's timeline file is drawn as text, never markup."""
    from attnexp.maps.html import Viewer, timeline_data
    from attnexp.maps.render import TIMELINE_SHOWN
    from helpers.browser import CHROMIUM, PAYLOAD, dump_dom, injected

    if CHROMIUM is None:
        pytest.skip("needs Debian's chromium (apt-get install chromium); .ci/run installs it")
    steps = np.array(tl.schedule(400, 30))
    n = len(steps)
    jump = np.where(np.arange(n) >= 20, 0.7, 0.05)
    t = planted(tmp_path, steps, {(1, 0): jump}, loss=np.where(np.arange(n) >= 20, 1.0, 3.0))
    for r in t.readings:
        r.values[PAYLOAD] = r.values["induction"]
    formed = ch.formations(t)
    data = timeline_data(t, formed, (*TIMELINE_SHOWN, PAYLOAD))
    assert data["steps"] == steps.tolist() and set(data["values"]) == {"induction", "prev_token", PAYLOAD}
    assert data["formations"] == [{"layer": 1, "head": 0, "role": "induction", "quantity": "induction",
                                   "step": int(steps[20])}]
    w = np.full((2, 1, 2, 3, 3), 1 / 3, dtype=np.float32)
    v = Viewer([["a", "b", "c"]], 64)
    v.add(-1, w)
    v.add(0, w)
    v.write(tmp_path / "viewer.html", "t", layers=2, heads=2, timeline=data)
    dom = dump_dom(tmp_path / "viewer.html")
    assert 'data-rendered="yes"' in dom and '<div id="tl" class="">' in dom, dom[-800:]
    assert not injected(dom)


def test_the_viewers_strip_labels_each_head_and_shades_an_epoch_only_when_it_is_not_all(tmp_path):
    """Issue 53: the strip's rows were labelled by layer only, and a one-epoch run's shown-epoch shading
    covered the whole strip. Now each head's row is labelled (L1 H0) where there is room, a one-epoch
    run's strip is not shaded (the reading of the maps is outlined), and of a 2-epoch run the shown
    epoch's readings only are shaded; what was drawn is said in the canvas's aria-label."""
    import re

    from attnexp.maps.html import Viewer, timeline_data
    from helpers.browser import CHROMIUM, dump_dom

    if CHROMIUM is None:
        pytest.skip("needs Debian's chromium (apt-get install chromium); .ci/run installs it")
    steps = np.array(tl.schedule(400, 30))
    t = planted(tmp_path, steps, {(1, 0): np.where(np.arange(len(steps)) >= 20, 0.7, 0.05)})
    w = np.full((2, 1, 2, 3, 3), 1 / 3, dtype=np.float32)
    labels = {}
    for epochs in (1, 2):
        for k, r in enumerate(t.readings):
            r.epoch = 0 if epochs == 1 or k < len(steps) // 2 else 1
        v = Viewer([["a", "b", "c"]], 64)
        for e in range(-1, epochs):
            v.add(e, w)
        page = tmp_path / f"viewer{epochs}.html"
        v.write(page, "t", layers=2, heads=2, timeline=timeline_data(t, ch.formations(t), ("induction", "prev_token")))
        labels[epochs] = re.search(r'aria-label="(heads timeline[^"]*)"', dump_dom(page)).group(1)
    assert "rows L0 H0 to L1 H1, one a head" in labels[1]
    assert "the shown epoch: every reading (not shaded)" in labels[1] and f"its maps at step {steps[-1]}" in labels[1]
    shaded = int(re.search(r"(\d+) readings shaded", labels[2]).group(1))
    assert shaded == sum(1 for r in t.readings if r.epoch == 1)


def test_a_light_readings_one_transfer_gives_the_same_numbers(tmp_path):
    """Issue 54: a timeline reading took its maps, token loss, induction pair and step loss from the
    device in four copies; probe.light_reading takes them in one. Every number is the same as the
    separate passes give (maps, token loss, every per-head score and role)."""
    import dataclasses

    import numpy as np
    import torch

    from attnexp.api import load, train
    from attnexp.config import MapsConfig
    from attnexp.heads.analysis import context_of, read_heads
    from attnexp.heads.probe import light_reading, maps_and_token_loss
    from helpers.runs import run_of

    s = train(run_of(["trainer.max_epochs=1", "data.n_sentences=200", "logger=none", "maps.enabled=false", "test=false",
                      "trainer.enable_progress_bar=false"], tmp_path / "run"))
    m = load(s["checkpoints"]["last"])
    text = "the dogs near the cat run . a cat sees the dog near the house and the dogs run to the cat ."
    probe = m.probe([text, "a cat sees the dog ."], say_unknown=False)
    ctx = context_of(m.model, probe, m.first_word_id)
    assert ctx.induction_ids and ctx.induction_control_ids
    view = dataclasses.replace(MapsConfig(), roles=True, importance=False, rollout=False, flow=False, relevance=False)
    w1, t1 = maps_and_token_loss(m.model, probe, m.pad_id)
    a1 = read_heads(m.model, probe, w1, m.pad_id, view, ctx)
    w2, t2, pair, loss, _ = light_reading(m.model, probe, m.pad_id, [ctx.induction_ids, *ctx.induction_control_ids],
                                       torch.tensor(1.25))
    a2 = read_heads(m.model, probe, w2, m.pad_id, view, ctx, pair_maps=pair)
    assert np.array_equal(w1, w2) and np.array_equal(t1, t2) and loss == 1.25
    assert a1.scores.keys() == a2.scores.keys() and all(np.array_equal(a1.scores[k], a2.scores[k]) for k in a1.scores)
    assert np.array_equal(a1.roles, a2.roles)
