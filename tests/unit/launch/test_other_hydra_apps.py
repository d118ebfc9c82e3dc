"""attnexp installed beside another Hydra application: Hydra's plugin scan executes each module of
`hydra_plugins/` that is not `_private`, outside sys.modules. With the sweeper's config dataclass
under `from __future__ import annotations`, `dataclasses` looked the module up there and every other
`@hydra.main` app and `compose` call in the environment crashed before its first line."""

from __future__ import annotations

import sys
from pathlib import Path

from helpers import installed


def test_another_hydra_app_starts_and_finds_the_sweeper(tmp_path):
    """The test venv holds attnexp as the README installs it (editable); the app's folder is not the
    checkout."""
    lines = installed.other_hydra_app(Path(sys.executable), tmp_path)
    assert "app ran" in lines
    assert "composed 0.1 hydra_plugins.attnexp_optuna_sweeper.sweeper.OptunaSweeper" in lines
    assert "OptunaSweeper" in next(line for line in lines if line.startswith("sweepers")).split()


def test_a_launcher_whose_extra_is_missing_names_its_install():
    """Issue 68 item 7: without the [cluster] extra, hydra/launcher=slurm said "hydra/launcher=submitit_slurm is
    not an option ...; choose one of: " with an empty list, where every other extra names its pip install."""
    from hydra.errors import MissingConfigException

    from attnexp.launch.command_line import explain

    e = MissingConfigException("Could not load 'hydra/launcher/submitit_slurm'", "hydra/launcher/submitit_slurm", [])
    said = explain(e, ["hydra/launcher=slurm"])
    assert "pip install 'attnexp[cluster]'" in said and "choose one of" not in said and "\n" not in said
