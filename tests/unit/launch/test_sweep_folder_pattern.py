"""A sweep goes where the user's hydra.sweep.dir pattern says, dated once. Before, a pattern holding
${now:...} was cut at its first ${now:} and given <date>/<time> of attnexp's own, so
lightning-hydra-template's `.../multiruns/${now:%Y-%m-%d}_${now:%H-%M-%S}` became a folder and a
subfolder, and whatever followed the date (`_${hydra.job.name}`) was dropped."""

from __future__ import annotations

import re

import pytest

from attnexp.cli import main

SMALL = ["trainer.max_epochs=1", "data.n_sentences=100", "logger=none", "maps.enabled=false", "test=false",
         "trainer.enable_progress_bar=false"]


@pytest.mark.parametrize("pattern,shape", [
    ("multiruns/${now:%Y-%m-%d}_${now:%H-%M-%S}", r"multiruns/\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d"),  # LHT's
    ("sw/${now:%Y}_${hydra.job.name}", r"sw/\d{4}_train"),  # the job's name, as Hydra's run names it
    ("${paths.sweep_dir}/${now:%Y-%m-%d}/${now:%H-%M-%S}", r"multirun/\d{4}-\d\d-\d\d/\d\d-\d\d-\d\d"),  # the default
])
def test_a_dated_sweep_folder_follows_the_users_pattern(pattern, shape, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["train", "-m", "seed=1,2", f"hydra.sweep.dir={pattern}", *SMALL]) == 0
    tables = [p.relative_to(tmp_path).parent.as_posix() for p in tmp_path.rglob("results.md")]
    assert len(tables) == 1 and re.fullmatch(shape, tables[0]), tables
    jobs = sorted(p.name for p in (tmp_path / tables[0]).iterdir() if p.is_dir())
    assert jobs == ["0_seed=1", "1_seed=2"], jobs
    assert f"{tmp_path / tables[0]}/results.md" in capsys.readouterr().out  # the folder the end names is that one
