"""A logger is added by its yaml and its adapter, nothing else (issue 51: logger-specific code sat in
four places; CONTRIBUTING named two): the throwaway logger of tests/helpers/throwaway_logger.py gets
its settings checked before the run, its dashboard command in summary.json, and the run's pictures."""

from __future__ import annotations

import pytest

from attnexp.api import compose, load_run, train
from attnexp.config import ConfigError
from attnexp.launch.compose import with_config_dir


@pytest.fixture
def conf(tmp_path):
    import helpers.throwaway_logger  # noqa: F401 - registers its adapter, as a user's package would on import

    (tmp_path / "conf" / "logger").mkdir(parents=True)
    (tmp_path / "conf" / "logger" / "throwaway.yaml").write_text(
        "throwaway:\n  _target_: helpers.throwaway_logger.ThrowawayLogger\n  save_dir: ${paths.output_dir}\n  loud: false\n")
    return tmp_path / "conf"


def test_a_logger_added_by_its_yaml_and_its_adapter_gets_what_attnexp_logs(conf, tmp_path):
    from lightning.pytorch.callbacks import Callback

    seen = {}

    class Keep(Callback):  # the trainer's logger object, to look at afterwards
        def on_fit_end(self, trainer, pl_module):
            seen["logger"] = trainer.loggers[0]

    overrides = with_config_dir(["logger=throwaway", "trainer.max_epochs=1", "data.n_sentences=200", "test=false"], str(conf))
    s = train(load_run(compose(overrides, tmp_path / "run")), callbacks=[Keep()])
    assert s["status"] == "completed" and s["dashboards"] == [f"ls {tmp_path / 'run'}"]
    lg = seen["logger"]
    assert type(lg).__name__ == "ThrowawayLogger" and any(k.startswith("attention_maps/") for k, _, _ in lg.images)
    assert any("val/loss" in m for _, m in lg.metrics)


def test_its_adapter_checks_its_settings_before_the_run(conf, tmp_path):
    overrides = with_config_dir(["logger=throwaway", "logger.throwaway.loud=true"], str(conf))
    with pytest.raises(ConfigError, match="the throwaway logger is quiet"):
        load_run(compose(overrides, tmp_path / "run"))
