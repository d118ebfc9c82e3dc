"""Dashboards opened as their users open them: a real server on 127.0.0.1, its HTTP API and a
headless-Chromium screenshot, stopped by PID (the dashboards issue). TensorBoard here; MLflow and
optuna-dashboard are not installed by the test extras yet."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.browser import needs_chromium
from helpers.runs import REPO


@pytest.mark.slow
@needs_chromium
@pytest.mark.skipif(shutil.which("tensorboard") is None and not Path(sys.executable).with_name("tensorboard").exists(),
                    reason="needs TensorBoard (pip install tensorboard; a dependency of attnexp)")
def test_tensorboard_shows_a_runs_curves_maps_and_settings(tmp_path):
    """scripts/dashboards.py trains a short copy run, starts TensorBoard over it, reads its API and
    screenshots the Images and Scalars tabs: the script fails when a plugin has no data, a val/ or
    train/ curve is missing, or the attention maps hold fewer than two epochs."""
    r = subprocess.run([sys.executable, "scripts/dashboards.py", f"--out={tmp_path}"], cwd=REPO, capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    found = json.loads(r.stdout[r.stdout.index("{"):])
    assert {"scalars", "images", "hparams"} <= set(found["plugins_with_data"])
    assert {"attention_maps/example0", "head_roles"} <= set(found["image_tags"]) and len(found["steps_of_first_image"]) == 3
    for tab in ("images", "scalars"):
        png = tmp_path / f"tensorboard_{tab}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 30_000  # a page, not a blank
    left = subprocess.run(["pgrep", "-f", f"tensorboard --logdir={found['run']}"], capture_output=True, text=True)
    assert left.stdout.strip() == "", "the TensorBoard server was not stopped"
