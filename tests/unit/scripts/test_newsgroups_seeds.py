"""scripts/studies/newsgroups_seeds.py end to end at tiny sizes: runs trained side by side with --only
are collected, not retrained; only the chosen candidate's runs are scored on test; the tables give
mean ± sd over the seeds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SCRIPT = [sys.executable, "scripts/studies/newsgroups_seeds.py", "--smoke"]


@pytest.mark.slow  # ~1 minute of tiny trainings
def test_runs_trained_apart_are_collected_and_only_the_chosen_is_tested(tmp_path):
    if not (REPO.parent / "shared" / "data" / "20newsgroups").is_dir():
        pytest.skip("../shared/data/20newsgroups is not here")
    where = [f"--runs-dir={tmp_path / 'runs'}", f"--out={tmp_path}"]
    first = subprocess.run([*SCRIPT, *where, "--only", "preset:1:raw", "len256:1:raw", "--threads", "1"], cwd=REPO,
                           capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    made = {p.name: (p / "summary.json").stat().st_mtime for p in (tmp_path / "runs").iterdir()}
    assert set(made) == {"preset-s1-raw", "len256-s1-raw"} and not (tmp_path / "newsgroups_seeds_cpu_smoke.json").exists()
    r = subprocess.run([*SCRIPT, *where], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    assert all((tmp_path / "runs" / n / "summary.json").stat().st_mtime == t for n, t in made.items())  # not retrained
    result = json.loads((tmp_path / "newsgroups_seeds_cpu_smoke.json").read_text())
    assert len(result["runs"]) == 2 * 3 * 2  # candidates x seeds x texts
    chosen = result["chosen"]["candidate"]
    means = {c: sum(v[t]["mean"] for t in ("raw", "clean")) for c, v in result["validation"].items()}
    assert chosen == max(means, key=means.get)
    assert {(r["candidate"], r["seed"], r["text"]) for r in result["chosen"]["runs"]} == \
        {(chosen, s, t) for s in (1, 2, 3) for t in ("raw", "clean")}  # the test split read for the chosen only
    assert result["chosen"]["test"]["raw"]["acc"]["n"] == 3 and " ± " in (tmp_path / "newsgroups_seeds_cpu_smoke.md").read_text()
