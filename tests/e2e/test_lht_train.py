"""lightning-hydra-template's tests/test_train.py and tests/test_eval.py, rewritten as attnexp
commands: each test names the one it mirrors (ashleve/lightning-hydra-template). LHT checks that
training runs; these also read the run's summary.json and checkpoints.

Where LHT's setting has no attnexp equivalent it is said beside it: `trainer=cpu` is the same,
`trainer=ddp_sim` is `trainer=ddp trainer.accelerator=cpu trainer.devices=2`, `ckpt_path=` of
eval.py is `attnexp eval ckpt=` (or `ckpt_path=`), and train.py's `ckpt_path=` (resume) is `resume=`.
The GPU tests (test_train_fast_dev_run_gpu, test_train_epoch_gpu_amp) carry the `cuda` marker: the GPU
suite's `pytest -m cuda` runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.runs import REPO

SMALL = ["trainer=cpu", "data.n_sentences=400", "model.d_model=32", "maps.n_examples=2", "logger=none",
         "trainer.enable_progress_bar=false"]


def attnexp(*args: str) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "attnexp", *args], cwd=REPO, capture_output=True, text=True, timeout=900,
                       env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def summary(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())


def test_train_fast_dev_run(tmp_path):
    """Mirrors test_train_fast_dev_run: `trainer.fast_dev_run=true`: one batch through everything,
    nothing saved."""
    attnexp("train", *SMALL, "trainer.fast_dev_run=true", f"hydra.run.dir={tmp_path}")
    s = summary(tmp_path)
    assert s["status"] == "completed" and s["steps"] == 1 and not list(tmp_path.glob("checkpoints/*.ckpt"))


@pytest.mark.cuda
def test_train_fast_dev_run_gpu(tmp_path):
    """Mirrors test_train_fast_dev_run_gpu: `trainer.fast_dev_run=true trainer.accelerator=gpu`."""
    attnexp("train", *[a for a in SMALL if a != "trainer=cpu"], "trainer.accelerator=gpu", "trainer.fast_dev_run=true",
            f"hydra.run.dir={tmp_path}")
    s = summary(tmp_path)
    assert s["status"] == "completed" and s["steps"] == 1 and "cpu" not in s["device"]


@pytest.mark.cuda  # cuda alone: `-m slow` would select a test marked slow too, and it needs a GPU
def test_train_epoch_gpu_amp(tmp_path):
    """Mirrors test_train_epoch_gpu_amp: one epoch on the GPU in 16-bit mixed precision (LHT's precision=16,
    Lightning 2's 16-mixed)."""
    attnexp("train", *[a for a in SMALL if a != "trainer=cpu"], "trainer.accelerator=gpu", "trainer.precision=16-mixed",
            "trainer.max_epochs=1", f"hydra.run.dir={tmp_path}")
    s = summary(tmp_path)
    assert s["status"] == "completed" and s["epochs"] == 1 and s["precision"] == "16-mixed"


def test_train_epoch_double_val_loop(tmp_path):
    """Mirrors test_train_epoch_double_val_loop: `trainer.max_epochs=1 +trainer.val_check_interval=0.5`:
    two validations in the epoch, counted: the record holds both (at the half and at the end of the
    epoch's steps) and so does the CSV log."""
    attnexp("train", *[a for a in SMALL if a != "logger=none"], "logger=csv", "trainer.max_epochs=1",
            "+trainer.val_check_interval=0.5", f"hydra.run.dir={tmp_path}")
    s = summary(tmp_path)
    assert s["status"] == "completed" and s["epochs"] == 1
    history = s["metrics"]["history"]
    assert [h["epoch"] for h in history] == [0, 0] and history[0]["step"] < history[1]["step"] == s["steps"], history
    import csv

    with open(tmp_path / "csv" / "metrics.csv") as f:
        logged = [row for row in csv.DictReader(f) if row.get("val/loss")]
    assert len(logged) == 2, logged
    assert (tmp_path / "checkpoints" / "last.ckpt").is_file()


@pytest.mark.slow
def test_train_ddp_sim(tmp_path):
    """Mirrors test_train_ddp_sim: two CPU processes, 2 epochs, a part of the batches (LHT's 0.01 of
    MNIST; here 2 batches a rank: Lightning refuses a fraction below one batch, and attnexp says so)."""
    attnexp("train", *SMALL, "trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2", "trainer.max_epochs=2",
            "trainer.limit_train_batches=2", "trainer.limit_val_batches=1", f"hydra.run.dir={tmp_path}")
    s = summary(tmp_path)
    assert s["status"] == "completed" and s["epochs"] == 2


def test_train_resume(tmp_path):
    """Mirrors test_train_resume: train 1 epoch, then 2 from its last.ckpt; the second run continues
    the first's steps rather than starting again (LHT checks the epoch files and that val/acc moved)."""
    attnexp("train", *SMALL, "trainer.max_epochs=1", f"hydra.run.dir={tmp_path}")
    first = summary(tmp_path)
    # resume=auto would leave a completed run alone (a re-launched sweep); a path continues it
    attnexp("train", *SMALL, "trainer.max_epochs=2", f"resume={first['checkpoints']['last']}", f"hydra.run.dir={tmp_path}")
    second = summary(tmp_path)
    assert first["epochs"] == 1 and second["epochs"] == 2 and second["steps"] == 2 * first["steps"]
    assert second["resumed_from"] == [first["checkpoints"]["last"]]  # every checkpoint the run resumed from


def test_train_eval(tmp_path):
    """Mirrors tests/test_eval.py::test_train_eval: train, then evaluate the best checkpoint on the same
    split; the evaluation's metrics equal the run's own scoring of that checkpoint."""
    attnexp("train", *SMALL, "trainer.max_epochs=2", f"hydra.run.dir={tmp_path}")
    s = summary(tmp_path)
    r = attnexp("eval", f"ckpt={s['checkpoints']['best']}", "split=val", f"out={tmp_path / 'eval'}")
    got = summary(tmp_path / "eval")["metrics"]["test"]
    assert got["val/acc"] == pytest.approx(s["metrics"]["test"]["best_val/acc"], abs=1e-6), r.stdout[-2000:]
