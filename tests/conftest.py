from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import open_dict, read_write

from attnexp.cli import conf_dir
from attnexp.config import register_schemas

CONF = conf_dir()
SHARED = Path(__file__).resolve().parents[1].parent / "shared"


def compose_cfg(overrides: list[str], out_dir: Path | str = "unused"):
    """Compose exactly as `python -m attnexp train` does (same conf dir, schemas, defaults)."""
    register_schemas()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=overrides, return_hydra_config=True)
        with read_write(cfg), open_dict(cfg):
            cfg.paths.output_dir = str(out_dir)
            cfg.hydra.runtime.output_dir = str(out_dir)
        HydraConfig.instance().set_config(cfg)  # lets ${hydra:...} interpolations resolve
    return cfg


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


@pytest.fixture
def compose_in(tmp_path):
    def _compose(*overrides: str):
        return compose_cfg(list(overrides), tmp_path / "run")
    return _compose
