"""Hydra's side of attnexp: the conf/ folder, the typed schemas registered in Hydra's ConfigStore,
and `compose`, the same composition as `python -m attnexp train` for scripts, notebooks and tests."""

from __future__ import annotations

from pathlib import Path


def conf_dir() -> Path:
    """conf/ of a source checkout (editable install), else the copy packaged with a wheel."""
    package = Path(__file__).resolve().parents[1]
    for cand in (package.parent / "conf", package / "conf"):
        if (cand / "config.yaml").is_file():
            return cand
    raise FileNotFoundError("attnexp's conf/ folder is missing; reinstall with `pip install -e .` from the repo")


def register_schemas() -> None:
    """Put the typed schemas in Hydra's ConfigStore; conf/ files inherit them (`/x_schema@_here_`,
    `optim_schema@optim`), so every key exists on every option and a wrong type fails at compose time."""
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    from attnexp.config import AttentionConfig, CheckpointConfig, MapsConfig, ModelConfig, OptimConfig, TaskConfig
    from attnexp.config.data import DATA_SETS
    from attnexp.data import configs  # noqa: F401  (registers the built-in data sets)

    # run folders say what ran: <time>_<experiment, or data-task>_<attention> (conf/config.yaml's hydra.run.dir)
    OmegaConf.register_new_resolver("attnexp_or", lambda first, other: other if first in (None, "", "None") else first,
                                    replace=True)
    # an absolute path: the MLflow logger's SQLite store and artifacts under paths.log_dir, wherever it is given
    OmegaConf.register_new_resolver("attnexp_abspath", lambda p: str(Path(p).resolve()), replace=True)
    cs = ConfigStore.instance()
    for name, node in [("attention", AttentionConfig), ("model", ModelConfig), ("task", TaskConfig),
                       ("optim", OptimConfig), ("maps", MapsConfig), ("checkpoint", CheckpointConfig)]:
        cs.store(name=f"{name}_schema", node=node)
    for data_name, node in DATA_SETS.items():
        cs.store(name=f"data_{data_name}_schema", node=node)
    from hydra_plugins.attnexp_optuna_sweeper import register

    register()


def compose(overrides: list[str], out_dir: str | Path = "unused"):
    """The config `attnexp train OVERRIDES` would run, for scripts, notebooks and tests: same conf
    dir, schemas and defaults; `paths.output_dir` set to `out_dir` (Hydra's run dir in the CLI)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict, read_write

    register_schemas()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = hydra_compose("config", overrides=list(overrides), return_hydra_config=True)
        with read_write(cfg), open_dict(cfg):
            cfg.paths.output_dir = str(out_dir)
            cfg.hydra.runtime.output_dir = str(out_dir)
        HydraConfig.instance().set_config(cfg)  # lets ${hydra:...} interpolations resolve
    return cfg
