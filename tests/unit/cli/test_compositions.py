"""How many times one command composes its config (issue 51): every composition costs ~0.6 s of a
run's start. A single run composes twice: once for attnexp's checks before Hydra (one line and no run
folder for a mistake), and once for the job inside Hydra's run. @hydra.main composes once more before
that, only to read hydra.mode (Hydra.get_mode), which attnexp's own composition already holds, so the
command line starts Hydra's run itself with that mode (attnexp/compat/hydra.run); Hydra's run composes
the job and nothing allows fewer. Before: 4 for a run without hydra.run.dir (its folder), then 3; a
sweep composed its fixed part twice more (the folder, the parallel launcher's share of the cores)."""

from __future__ import annotations

import pytest

from attnexp.cli import main

QUICK = ["logger=none", "maps.enabled=false", "trainer.max_epochs=1", "data.n_sentences=100", "test=false",
         "trainer.enable_progress_bar=false"]


@pytest.fixture
def compositions(monkeypatch):
    import hydra._internal.config_loader_impl as loader

    counted = {"n": 0}
    original = loader.ConfigLoaderImpl.load_configuration

    def load_configuration(self, *args, **kwargs):
        counted["n"] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(loader.ConfigLoaderImpl, "load_configuration", load_configuration)
    return counted


def test_a_single_run_composes_twice(tmp_path, monkeypatch, compositions):
    monkeypatch.chdir(tmp_path)
    assert main(["train", *QUICK]) == 0  # its folder from paths.log_dir: the precheck's composition
    assert compositions["n"] == 2


def test_a_sweep_composes_its_fixed_part_its_jobs_and_hydras_own(tmp_path, monkeypatch, compositions):
    monkeypatch.chdir(tmp_path)
    assert main(["train", "-m", "seed=0,1", *QUICK]) == 0
    # attnexp before Hydra: the fixed part (the sweeper, the folder, the launcher's share of the cores) and each
    # of 2 jobs (one line and no folder for a job that does not compose); Hydra: its multirun config (its run
    # mode is the precheck's), then each job's twice (its BasicSweeper validates the batch, its launcher
    # composes the job). Before: 10, then 9
    assert compositions["n"] == 3 + 1 + 2 + 2, compositions["n"]
