"""attnexp's Optuna sweeper for Hydra (`hydra/sweeper=attnexp_optuna`), on Optuna 4's ask/tell API.

The released hydra-optuna-sweeper wheels (1.2.0, 1.3.0) still require optuna<3 (and the
SQLAlchemy of that time); its main branch moved to Optuna 4 but is not released. This one is
small, and does what attnexp needs besides: the direction follows the monitored metric, the study
lives in a SQLite file (resumable, readable by optuna-dashboard), trials whose process died are
run again, and in-process jobs are pruned from their per-epoch values."""


def register() -> None:
    """Make `hydra/sweeper=attnexp_optuna` known however attnexp is installed. Hydra finds plugins by
    scanning the `hydra_plugins` namespace package, which setuptools' editable installs (pip install
    -e .) hide behind an import hook the scan does not follow; Hydra's own Plugins.register fills in."""
    from hydra.core.plugins import Plugins

    from hydra_plugins.attnexp_optuna_sweeper.sweeper import OptunaSweeper

    Plugins.instance().register(OptunaSweeper)
