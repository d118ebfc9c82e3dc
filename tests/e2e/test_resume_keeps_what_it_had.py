"""A resumed run keeps what it had (issue 52). Before: on resume, one damaged line, a NaN or an
oversized cell in maps/timeline.jsonl made the run start the file again without a word (the first
part's readings gone, formations then dated from half a run); timeline.jsonl made a folder was a
traceback; a checkpoint whose maps state was forged (a string or null) was a traceback."""

from __future__ import annotations

import json

import pytest
import torch

from attnexp.api import train
from helpers.runs import attnexp, run_of

pytestmark = pytest.mark.slow  # three short trainings and two resumes (~40 s)
QUICK = ["data.n_sentences=400", "logger=none", "trainer.enable_progress_bar=false", "maps.animation=false",
         "maps.n_examples=2", "test=false", "maps.timeline_points=12"]


def readings(path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()[1:] if x]


def test_a_damaged_timeline_keeps_its_whole_readings_on_resume(tmp_path, caplog):
    run = tmp_path / "run"
    first = train(run_of([*QUICK, "trainer.max_epochs=2"], run))
    timeline = run / "maps" / "timeline.jsonl"
    before = readings(timeline)
    assert first["status"] == "completed" and len(before) >= 6
    lines = timeline.read_text().splitlines()
    nan = json.loads(lines[3])
    nan["values"][next(iter(nan["values"]))][0][0] = float("nan")
    lines[3] = json.dumps(nan)  # a NaN in one reading
    lines.insert(2, '{"step": "oops"')  # a line cut and garbled
    timeline.write_text("\n".join(lines) + "\n")
    with caplog.at_level("WARNING", logger="attnexp"):
        again = train(run_of([*QUICK, "trainer.max_epochs=3", "resume=auto"], run))
    assert again["status"] == "completed"
    after = [r["step"] for r in readings(timeline)]
    assert after[0] == before[0]["step"] and after == sorted(set(after))
    survivors = [r["step"] for i, r in enumerate(before) if i != 2]  # all but the NaN one (line 4 = reading 3)
    assert set(survivors) <= set(after), (survivors, after)  # every whole reading of the first part kept
    assert max(after) > max(r["step"] for r in before)  # and the resumed part appended
    said = [r.getMessage() for r in caplog.records if "damaged line" in r.getMessage()]
    assert len(said) == 1 and "2 damaged line(s) left out" in said[0], said


def test_a_folder_where_the_timeline_goes_is_one_line(tmp_path):
    run = tmp_path / "run"
    (run / "maps" / "timeline.jsonl").mkdir(parents=True)
    r = attnexp("train", *QUICK, "trainer.max_epochs=1", f"hydra.run.dir={run}", cwd=tmp_path)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    said = [x for x in (r.stdout + r.stderr).splitlines() if "a folder where the heads timeline goes" in x]
    assert len(said) == 1, r.stderr[-2000:]


def test_forged_maps_state_in_a_checkpoint_is_one_line(tmp_path):
    run = tmp_path / "run"
    s = train(run_of([*QUICK, "trainer.max_epochs=1"], run))
    ckpt = torch.load(s["checkpoints"]["last"], weights_only=True)
    key = next(k for k in ckpt["callbacks"] if "AttentionMaps" in k)
    for name, forged in (("string", {**ckpt["callbacks"][key], "epochs": "0,1,2"}),
                         ("none", {**ckpt["callbacks"][key], "timeline_step": "late", "epochs": None})):
        ckpt["callbacks"][key] = forged
        path = tmp_path / f"{name}.ckpt"
        torch.save(ckpt, path)
        r = attnexp("train", *QUICK, "trainer.max_epochs=2", f"resume={path}", f"hydra.run.dir={tmp_path / name}",
                    cwd=tmp_path)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
        assert "the checkpoint's attention-maps state is not what attnexp writes" in r.stderr, r.stderr[-1000:]


def test_a_snapshot_bigger_than_this_runs_maps_is_left_out_on_resume(tmp_path, caplog):
    """Issue 52. Before: each snapshot's weights could take up to 1 GB, nothing bounded them by the run's
    own model (two 0.95 MB files in a resumed folder took 4.3 GB). Here a 64 MB array of zeros (a few
    kB on disk) planted as the first epoch's snapshot is refused from its zip header, in one line."""
    import numpy as np

    from attnexp.maps import snapshot

    run = tmp_path / "run"
    train(run_of([*QUICK, "trainer.max_epochs=1"], run))
    planted = snapshot.npz(run / "maps", 0)
    assert planted.is_file()
    with open(planted, "wb") as f:
        np.savez_compressed(f, weights=np.zeros((1, 1, 1, 4000, 4000), dtype=np.float32))
    with caplog.at_level("WARNING", logger="attnexp"):
        again = train(run_of([*QUICK, "trainer.max_epochs=2", "resume=auto"], run))
    assert again["status"] == "completed"
    said = [r.getMessage() for r in caplog.records if str(planted) in r.getMessage()]
    assert len(said) == 1 and "its weights would take 64,000,128 bytes; this run's maps take at most" in said[0], said
