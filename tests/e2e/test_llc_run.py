"""maps.llc=true through `python -m attnexp train`: the LLC at its readings in timeline.jsonl, its
stages in summary.json, a scalar on TensorBoard, a panel in the viewer's strip and the timeline
picture, and training untouched: the same losses at every reading as the run without it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attnexp.heads import timeline as tl
from helpers.runs import attnexp

pytest.importorskip("devinterp", reason="maps.llc needs devinterp: pip install 'attnexp[llc]'")

TINY = ["experiment=induction_heads", "data.n_train=640", "data.n_val=32", "data.n_test=32", "maps.every_n_steps=4",
        "trainer.val_check_interval=1.0", "maps.animation=false", "test=false", "threads=1", "seed=3"]


@pytest.mark.slow
def test_the_llc_is_read_at_its_readings_and_training_goes_on_as_without_it(tmp_path):
    on = attnexp("train", *TINY, "maps.llc=true", "maps.llc_readings=3", "maps.llc_draws=8", "maps.llc_chains=2",
                 "maps.llc_examples=64", f"hydra.run.dir={tmp_path / 'on'}", cwd=tmp_path)
    assert on.returncode == 0, on.stderr[-2000:]
    off = attnexp("train", *TINY, "logger=none", f"hydra.run.dir={tmp_path / 'off'}", cwd=tmp_path)
    assert off.returncode == 0, off.stderr[-2000:]
    t_on, t_off = tl.read(tmp_path / "on" / "maps" / tl.FILE), tl.read(tmp_path / "off" / "maps" / tl.FILE)
    x = t_on.scalar("llc")
    assert t_on.steps[np.isfinite(x)].tolist() == [4, 12, 20]  # 3 of the readings after step 0, evenly among them
    assert np.isnan(t_off.scalar("llc")).all()
    assert np.array_equal(t_on.scalar("loss"), t_off.scalar("loss"), equal_nan=True)  # the SGLD chains took nothing from training
    assert np.array_equal(t_on.curve("induction"), t_off.curve("induction"))
    said = json.loads((tmp_path / "on" / "summary.json").read_text())["attention_maps"]["timeline"]["llc"]
    assert said["estimates"] == 3 and said["passes_each"] == 16 and said["windows"][0] == 64
    assert said["stages"] and {s["kind"] for s in said["stages"]} <= {"rise", "fall", "plateau"}
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ev = EventAccumulator(str(tmp_path / "on" / "tensorboard"), size_guidance={"scalars": 0}).Reload()
    assert [e.step for e in ev.Scalars("timeline/llc")] == [4, 12, 20]
    page = (tmp_path / "on" / "maps" / "viewer.html").read_text()
    assert '"llc": [' in page.replace('"llc":[', '"llc": [') and '"stages":' in page.replace('"stages": ', '"stages":')
    assert (tmp_path / "on" / "maps" / "timeline.png").stat().st_size > 0


def test_the_llc_of_a_classifier_or_a_bidirectional_model_is_refused_before_the_run(tmp_path):
    r = attnexp("train", "task=classify", "data=toy", "maps.llc=true", f"hydra.run.dir={tmp_path / 'c'}", cwd=tmp_path)
    assert r.returncode != 0 and "maps.llc=true estimates the LLC of a next-token loss" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "c" / "maps").exists()
