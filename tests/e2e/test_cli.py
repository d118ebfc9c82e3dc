"""The command line as a user meets it: one clear line for a bad override, a sweep that goes on past
a bad job, help and every command, epoch lines instead of bar redraws in a log, and `attnexp maps`
on a trained checkpoint (unknown words said, earlier maps never overwritten)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from attnexp.api import train
from attnexp.cli import main
from helpers.runs import run_of

FAST = ["trainer.enable_progress_bar=false", "data.n_sentences=300", "logger=none"]
QUICK = ["trainer.enable_progress_bar=false", "data.n_sentences=400", "trainer.max_epochs=2", "maps.n_examples=2"]


def run_cli(*args, cwd):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-m", "attnexp", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_maps_command_reports_unknown_words_and_never_overwrites(tmp_path, capsys):
    s = train(run_of([*QUICK, "logger=none", "trainer.max_epochs=1"], tmp_path))
    ckpt = s["checkpoints"]["last"]
    for _ in range(2):
        assert main(["maps", f"ckpt={ckpt}", "text=the zebra sleeps near the quokka ."]) == 0
    err = capsys.readouterr().err
    assert "2 word(s) of 'the zebra sleeps near the quokka .' are not in the vocabulary and became [UNK]: zebra, quokka" in err
    assert sorted(p.name for p in (tmp_path / "maps").glob("custom_*")) == ["custom_last", "custom_last-2"]


@pytest.mark.slow
def test_a_piped_run_writes_epoch_lines_not_bar_redraws(tmp_path):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    r = subprocess.run([sys.executable, "-m", "attnexp", "train", "trainer.max_epochs=3", "data.n_sentences=600",
                        "logger=none", f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stdout.splitlines() if "[attnexp][INFO] - epoch " in x]
    said = [x.split(" - ")[1].split(" · ")[0] for x in lines]
    assert said == ["epoch 0 (1 of 3)", "epoch 1 (2 of 3)", "epoch 2 (3 of 3)"], r.stdout
    assert "\r" not in r.stdout and len(r.stdout) + len(r.stderr) < 8000, len(r.stdout)
    assert "attnexp: run completed" in r.stdout


@pytest.mark.parametrize("override,needle", [
    pytest.param("attention=nope", "attention=nope is not an option of attention; choose one of", marks=pytest.mark.slow),
    ("model.n_heads=5", "model.d_model=64 is not divisible by model.n_heads=5"),  # the default run's one CLI call
    pytest.param("optim.lr=-1", "optim.lr=-1.0 must be positive", marks=pytest.mark.slow),
    pytest.param("data.corpus=missing.txt", "data.corpus='missing.txt': no such file", marks=pytest.mark.slow),
])
def test_cli_bad_override_is_one_clear_line(override, needle, tmp_path):
    r = run_cli("train", override, "logger=none", cwd=tmp_path)
    assert r.returncode != 0
    assert needle in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.slow
def test_cli_sweep_keeps_going_past_a_bad_job(tmp_path):
    r = run_cli("train", "-m", "model.n_heads=4,5", "trainer.fast_dev_run=true", "logger=none",
                "data.n_sentences=200", "trainer.enable_progress_bar=false", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert "1 run(s) of the sweep failed" in r.stderr
    status = sorted(json.loads(p.read_text())["status"] for p in tmp_path.glob("multirun/*/*/*/summary.json"))
    assert status == ["completed", "config_error"]
    done = [json.loads(p.read_text()) for p in tmp_path.glob("multirun/*/*/*/summary.json")]
    assert [0 < s["startup_s"] < 120 for s in done if s["status"] == "completed"] == [True]  # `python -m attnexp` to training
    # `compare` with no folder reads the newest sweep: one row a job, the swept key as a column
    r = run_cli("compare", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    head, _, *rows = r.stdout.strip().splitlines()
    assert [c.strip() for c in head.strip("|").split("|")][:3] == ["run", "model.n_heads", "status"]
    assert len(rows) == 2 and any("config_error" in x and "not divisible" in x for x in rows), r.stdout


@pytest.mark.slow
def test_cli_help_and_commands(tmp_path):
    assert "train" in run_cli("--help", cwd=tmp_path).stdout
    h = run_cli("train", "--help", cwd=tmp_path).stdout
    for group in ("attention:", "model:", "data:", "task:", "trainer:", "logger:", "experiment:"):
        assert group in h
    r = run_cli("frobnicate", cwd=tmp_path)
    assert r.returncode == 2 and "unknown command" in r.stderr


def test_the_readme_names_every_option_of_every_config_group():
    from helpers.runs import REPO, options

    text = (REPO / "README.md").read_text()
    section = text[text.index("### Config groups"):text.index("Top-level keys")]
    rows = {line.split("|")[1].strip(" `"): line.split("|")[2] for line in section.splitlines() if line.startswith("| `")}
    for group in ("attention", "model", "data", "task", "trainer", "logger", "experiment", "hparams_search", "debug"):
        missing = [o for o in options(group) if f"`{o}`" not in rows[group]]
        assert not missing, f"README's config-group table lacks {group}: {missing}"


@pytest.mark.slow
def test_two_devices_with_the_default_trainer_run_data_parallel(tmp_path):
    r = run_cli("train", "trainer.accelerator=cpu", "trainer.devices=2", *FAST, "trainer.max_epochs=1",
                f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert s["status"] == "completed" and s["steps"] > 0
