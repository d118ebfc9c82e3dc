"""The sweep's end finds its jobs by what a job writes once its folder is its own. Before, it looked
for `.hydra/` alone: a sweep with the user's hydra.output_subdir (cfg, or null) trained every job
and then said "1 run(s) of the sweep failed: no job folder" and exited 1."""

from __future__ import annotations

import pytest

from attnexp.cli import main
from attnexp.cli.sweep_end import finish_sweep, sweep_jobs
from attnexp.config import layout

SMALL = ["trainer.max_epochs=1", "data.n_sentences=100", "logger=none", "maps.enabled=false", "test=false",
         "trainer.enable_progress_bar=false"]


@pytest.mark.parametrize("subdir", ["cfg", "meta/hydra", "null"])
def test_a_sweep_with_the_users_output_subdir_finds_its_jobs(subdir, tmp_path, capsys):
    root = tmp_path / "sweep"
    assert main(["train", "-m", "seed=1,2", f"hydra.output_subdir={subdir}", f"hydra.sweep.dir={root}", *SMALL]) == 0
    err = capsys.readouterr().err
    assert "failed" not in err and "no job folder" not in err, err
    assert len(sweep_jobs(root, None if subdir == "null" else subdir)) == 2
    if subdir != "null":
        assert all((job / subdir / "config.yaml").is_file() for job in sweep_jobs(root, subdir))


def test_a_job_that_died_once_its_folder_was_its_own_counts_as_failed(tmp_path, capsys):
    """A folder that holds only the lock a killed job left (no summary.json, no Hydra files) is a job."""
    root = tmp_path / "sweep"
    (root / "0_seed=1").mkdir(parents=True)
    (root / "0_seed=1" / layout.LOCK).write_text('{"pid": 1}')
    assert sweep_jobs(root, None) == [root / "0_seed=1"]
    assert finish_sweep(root, subdir=None) == 1
    assert "0_seed=1: summary.json" in capsys.readouterr().err
