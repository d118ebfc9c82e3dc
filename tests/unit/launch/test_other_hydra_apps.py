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
