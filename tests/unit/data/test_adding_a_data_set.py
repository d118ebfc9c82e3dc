"""A new data set is one module (its config and its DataModule) and one yaml: written in a
temporary module and a temporary conf folder, with no other edit it composes with Hydra's type
checks, validates with the shared checks and its own, trains, evaluates, and is named in the
one-line error for an unknown data.name."""

from __future__ import annotations

import pytest

from attnexp.api import evaluate, load_run, train
from attnexp.config import ConfigError
from attnexp.config.data import DATA_SETS
from helpers.runs import compose_cfg
from helpers.tests_data import COUNTING_MODULE
from helpers.throwaway import imported

MODULE = COUNTING_MODULE
YAML = """\
defaults:
  - /data_throwaway_counting_schema@_here_
  - _self_

name: throwaway_counting
"""


@pytest.fixture
def throwaway(tmp_path):
    (tmp_path / "conf" / "data").mkdir(parents=True)
    (tmp_path / "conf" / "data" / "throwaway_counting.yaml").write_text(YAML)
    with imported(tmp_path, "throwaway_data", MODULE, DATA_SETS):
        yield [f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "data=throwaway_counting", "attention=causal", "task=lm"]


def test_a_data_set_in_a_module_of_its_own_is_found_everywhere(throwaway, tmp_path):
    quick = [*throwaway, "logger=none", "trainer.enable_progress_bar=false", "maps.animation=false", "maps.n_examples=2"]
    run = load_run(compose_cfg([*quick, "trainer.max_epochs=3", "optim.lr=3e-3"], tmp_path / "run"))
    assert type(run.data).__name__ == "CountingDataConfig" and run.data.batch_size == 64  # the shared defaults
    s = train(run)
    assert s["status"] == "completed" and s["data"]["identity"]["splits"] == {"train": 300, "val": 60}
    assert s["metrics"]["history"][-1]["val/acc"] > 0.5  # counting is learnt (chance is 1/12)
    e = evaluate(s["checkpoints"]["best"], split="val", out=str(tmp_path / "eval"))  # the data rebuilt from the checkpoint
    assert e["metrics"]["test"]["val/acc"] == pytest.approx(s["metrics"]["history"][-1]["val/acc"], abs=1e-6)

    with pytest.raises(ConfigError, match=r"data.length=20 needs 22 tokens; raise data.max_len=16"):
        load_run(compose_cfg([*quick, "data.length=20"], tmp_path / "bad"))  # its own check
    with pytest.raises(ConfigError, match=r"data.batch_size=0 must be positive"):
        load_run(compose_cfg([*quick, "data.batch_size=0"], tmp_path / "bad"))  # the shared ones
    with pytest.raises(Exception, match="n_symbols"):
        compose_cfg([*quick, "data.n_symbols=many"], tmp_path / "bad")  # Hydra's type check, from the schema
    with pytest.raises(ConfigError, match="not one of: .*throwaway_counting"):
        load_run(compose_cfg([*quick, "data.name=nope"], tmp_path / "bad"))


def test_a_data_set_name_is_registered_once():
    from dataclasses import dataclass

    from attnexp.config.data import DataConfig, register
    from attnexp.data.configs import ToyDataConfig

    assert register(ToyDataConfig) is ToyDataConfig  # the same class again: no harm

    @dataclass
    class ToyDataConfig(DataConfig):  # another module's class of the same name
        name: str = "toy"

    ToyDataConfig.__qualname__ = "ToyDataConfig"  # as a top-level class of that module would be
    with pytest.raises(ValueError, match="data set 'toy' is registered twice: attnexp.data.configs and"):
        register(ToyDataConfig)
