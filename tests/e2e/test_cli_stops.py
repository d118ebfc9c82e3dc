"""The command line stopped from outside, as a user or a cluster stops it: a stop signal's exit code and
its "Resume with:" line, pasted back as printed; a SIGKILLed run still in `compare`; a diverged run's
exit code. (A run's own stops and resumes, in process: tests/e2e/test_signals_and_resume.py.)"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attnexp.cli.compare import compare_cli
from helpers.runs import strict_json

LONG = ["data.n_sentences=3000", "trainer.max_epochs=4", "logger=none", "trainer.enable_progress_bar=false",
        "maps.enabled=false", "test=false"]


def start(args: list[str], cwd: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "attnexp", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_for(path: Path, ok, timeout: float = 120) -> dict:
    end = time.time() + timeout
    while time.time() < end:
        try:
            s = json.loads(path.read_text())
            if ok(s):
                return s
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    raise AssertionError(f"{path} never satisfied the condition")


@pytest.mark.slow
@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["SIGTERM", "SIGINT"])
def test_cli_stop_signal_exits_with_its_code_and_says_how_to_resume(sig, code, tmp_path):
    run_dir = tmp_path / "run"
    p = start(["train", *LONG, f"hydra.run.dir={run_dir}"], tmp_path)
    wait_for(run_dir / "summary.json", lambda s: s["status"] == "running")
    time.sleep(1.0)  # a few steps in
    p.send_signal(sig)
    _, err = p.communicate(timeout=120)
    assert p.returncode == code, err
    s = strict_json(run_dir / "summary.json")
    assert s["status"] == "interrupted" and s["signal"] == sig.name and s["steps"] > 0
    line = [x for x in err.splitlines() if x.startswith("attnexp:")]
    assert len(line) == 1 and "Resume with: python -m attnexp train" in line[0], err
    again = line[0].split("Resume with: ", 1)[1].split()[4:]  # the overrides of the printed command
    assert f"hydra.run.dir={run_dir}" in again and "resume=auto" in again
    p = start(["train", *again], tmp_path)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    s = strict_json(run_dir / "summary.json")
    assert s["status"] == "completed" and s["epochs"] == 4 and len(s["metrics"]["history"]) == 4
    assert s["resumed_from"] == [str(run_dir / "checkpoints" / "interrupted.ckpt")]


@pytest.mark.slow
def test_the_resume_line_of_a_run_of_a_users_experiment_keeps_its_config_dir(tmp_path):
    """A run of the user's own experiment (--config-dir DIR experiment=mine) stopped by SIGTERM: the
    "Resume with:" line dropped --config-dir, so pasted as printed it said "experiment=mine is not an
    option" instead of continuing the run."""
    (tmp_path / "myconf" / "experiment").mkdir(parents=True)
    (tmp_path / "myconf" / "experiment" / "mine.yaml").write_text("# @package _global_\nmodel:\n  n_layers: 1\n")
    run_dir = tmp_path / "run"
    p = start(["train", "--config-dir", "myconf", "experiment=mine", *LONG, f"hydra.run.dir={run_dir}"], tmp_path)
    wait_for(run_dir / "summary.json", lambda s: s["status"] == "running")
    time.sleep(1.0)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 143, err
    (line,) = [x for x in err.splitlines() if "Resume with: " in x]
    p = start(shlex.split(line.split("Resume with: ", 1)[1])[3:], tmp_path)  # pasted: after `python -m attnexp`
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    s = strict_json(run_dir / "summary.json")
    assert s["status"] == "completed" and s["epochs"] == 4 and s["choices"]["experiment"] == "mine"
    assert s["resumed_from"] == [str(run_dir / "checkpoints" / "interrupted.ckpt")]


@pytest.mark.slow
def test_cli_sigkilled_run_still_shows_in_compare_with_its_last_epoch(tmp_path, capsys):
    run_dir = tmp_path / "runs" / "killed"
    p = start(["train", *LONG, "trainer.max_epochs=50", f"hydra.run.dir={run_dir}"], tmp_path)
    wait_for(run_dir / "summary.json", lambda s: len(s["metrics"]["history"]) >= 1)
    p.kill()
    p.wait(timeout=60)
    s = strict_json(run_dir / "summary.json")
    assert s["status"] == "running" and s["metrics"]["history"]
    assert compare_cli([str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "killed" in out and f"epoch {s['metrics']['history'][-1]['epoch']}" in out, out


@pytest.mark.slow
def test_cli_divergence_exits_3_in_one_line(tmp_path):
    p = start(["train", *LONG, "optim.lr=1e4", f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    _, err = p.communicate(timeout=300)
    assert p.returncode == 3, err
    lines = [x for x in err.splitlines() if x.startswith("attnexp:")]
    assert len(lines) == 1 and "diverged" in lines[0] and "stopped being a number at step" in lines[0]
    assert strict_json(tmp_path / "run" / "summary.json")["status"] == "diverged"
