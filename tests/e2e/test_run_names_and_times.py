"""A run folder says what ran, and a sweep job's times are its own. Before: `attention.name=alibi`
trained alibi in a folder named ..._causal (the folder took Hydra's choice, not the variant), and
inside a sweep every job's times counted from the sweep's start (run 3 of a 2x2 sweep: '29.5 s
training (197.6 s in all)', startup_s 164 for a 35 s run)."""

from __future__ import annotations

import json

from attnexp.cli import main

FAST = ["trainer.max_epochs=1", "data.n_sentences=200", "logger=none", "maps.enabled=false", "test=false",
        "trainer.enable_progress_bar=false"]


def test_the_folder_names_the_variant_that_ran(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["train", "attention.name=alibi", *FAST]) == 0
    assert main(["train", "attention=bidirectional", *FAST]) == 0
    names = sorted(p.name.split("_", 1)[1] for p in (tmp_path / "outputs").glob("*/*"))
    assert names == ["toy-lm_alibi", "toy-lm_bidirectional"]


def test_a_sweep_jobs_times_count_from_its_own_start(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["train", "-m", "seed=0,1,2", *FAST]) == 0
    runs = sorted((json.loads(p.read_text()) for p in (tmp_path / "multirun").rglob("summary.json")),
                  key=lambda s: s["seed"])
    first = runs[0]
    for later in runs[1:]:  # a later job's start-up and wall time are its own, not the sweep's so far
        assert later["startup_s"] < first["wall_time_s"], (later["startup_s"], first["wall_time_s"])
        assert later["wall_time_s"] < later["train_time_s"] + first["wall_time_s"]
