"""Hydra's side of attnexp: the conf/ folder, the typed schemas registered in Hydra's ConfigStore,
and `compose`, the same composition as `python -m attnexp train` for scripts, notebooks and tests."""

from __future__ import annotations

from pathlib import Path

from attnexp.config import AttentionConfig, CheckpointConfig, ConfigError, MapsConfig, ModelConfig, OptimConfig, TaskConfig
from attnexp.config.data import DATA_SETS
from attnexp.config.paths import conf_dir


def with_config_dir(overrides: list[str], config_dir: str | None) -> list[str]:
    """`overrides` with Hydra's `--config-dir DIR` as the `hydra.searchpath` entry it amounts to (after
    any the user gave), so attnexp's checks compose what Hydra's run will: a user's own
    experiment/, attention/ or data/ yaml beside attnexp's. A folder that is not there is one line."""
    if not config_dir:
        return list(overrides)
    folder = Path(config_dir).expanduser().resolve()
    if not folder.is_dir():
        raise ConfigError(f"--config-dir {config_dir}: no such folder; give the folder that holds your own "
                          f"experiment/, attention/ or data/ yaml files (docs/extending.md)")
    given = [o for o in overrides if o.startswith("hydra.searchpath=")]
    entries = search_entries(given[-1]) if given else []
    rest = [o for o in overrides if not o.startswith("hydra.searchpath=")]
    return [*rest, f"hydra.searchpath=[{','.join([*entries, f'file://{folder}'])}]"]


def search_entries(override: str) -> list[str]:
    """The folders of one `hydra.searchpath=[a,b]` override, as Hydra's grammar reads the list."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    value = OverridesParser.create().parse_override(override).value()
    return [str(v) for v in (value if isinstance(value, list) else [value])]


def search_path(overrides: list[str]):
    """attnexp's conf/ and the folders of any `hydra.searchpath` override, as Hydra searches them."""
    from attnexp.compat.hydra import config_search_path

    path = config_search_path(str(conf_dir()))
    for o in overrides:
        if o.startswith("hydra.searchpath="):
            for entry in search_entries(o):
                path.append("command-line", entry)
    return path


def job_dirname(override_dirname: str) -> str:
    """A sweep job's folder name from its swept settings: one name inside the sweep folder whatever a
    value holds (a '/' is written %2F, so `data.corpus=a/../../../x.txt` cannot climb out of the
    sweep, where results.md and the failure list never saw it), at most 200 bytes (a short hash of the
    rest after that)."""
    import hashlib

    name = str(override_dirname).replace("%", "%25").replace("/", "%2F").replace("\\", "%5C").replace("\0", "")
    if len(name.encode()) > 200:
        name = name.encode()[:180].decode(errors="ignore") + "~" + hashlib.sha256(name.encode()).hexdigest()[:12]
    return name


def attention_label(choice: str, name: str) -> str:
    """The attention part of a run folder's name: the option chosen (`causal`, `rotary`), unless
    attention.name picked another variant than that option's (`attention.name=alibi` on the default
    `causal` trained alibi in a folder named ..._causal)."""
    import yaml

    path = conf_dir() / "attention" / f"{choice}.yaml"
    try:
        sets = (yaml.safe_load(path.read_text()) or {}).get("name") if path.is_file() else None
    except (OSError, yaml.YAMLError):
        sets = None
    return str(name) if sets is not None and str(sets) != str(name) else str(choice)


def register_resolvers() -> None:
    """The resolvers conf/config.yaml's folder names use; registered by the command line and again
    where a job's config is resolved in another process (attnexp/cli/train.py imports this)."""
    from omegaconf import OmegaConf

    # run folders say what ran: <time>_<experiment, or data-task>_<attention> (conf/config.yaml's hydra.run.dir)
    OmegaConf.register_new_resolver("attnexp_or", lambda first, other: other if first in (None, "", "None") else first,
                                    replace=True)
    # an absolute path: the MLflow logger's SQLite store and artifacts under paths.log_dir, wherever it is given
    OmegaConf.register_new_resolver("attnexp_abspath", lambda p: str(Path(p).resolve()), replace=True)
    OmegaConf.register_new_resolver("attnexp_jobdir", job_dirname, replace=True)
    # logger=wandb: WANDB_MODE as wandb reads it (offline/dryrun: offline; online, disabled: wandb.init decides)
    OmegaConf.register_new_resolver("attnexp_offline", lambda mode: str(mode) in ("offline", "dryrun"), replace=True)
    OmegaConf.register_new_resolver("attnexp_attention", attention_label, replace=True)


def register_schemas() -> None:
    """Put the typed schemas in Hydra's ConfigStore; conf/ files inherit them (`/x_schema@_here_`,
    `optim_schema@optim`), so every key exists on every option and a wrong type fails at compose time."""
    from hydra.core.config_store import ConfigStore

    from attnexp.data import configs  # noqa: F401  (registers the built-in data sets)

    register_resolvers()
    cs = ConfigStore.instance()
    for name, node in [("attention", AttentionConfig), ("model", ModelConfig), ("task", TaskConfig),
                       ("optim", OptimConfig), ("maps", MapsConfig), ("checkpoint", CheckpointConfig)]:
        cs.store(name=f"{name}_schema", node=node)
    for data_name, node in DATA_SETS.items():
        cs.store(name=f"data_{data_name}_schema", node=node)
    store_plugin_options(cs, DATA_SETS)
    from hydra_plugins.attnexp_optuna_sweeper import register

    register()


def store_plugin_options(cs, data_sets: dict) -> None:
    """`data=NAME` and `attention=NAME` for a data set or variant that an installed package registered
    through an entry point (attnexp/config/plugins.py): its schema with its defaults, so it composes,
    validates and is listed by --help like a built-in option, with no yaml. The attention registry
    (and torch) is imported here only when some package declares a variant."""
    from importlib.metadata import entry_points

    from attnexp.config import AttentionConfig, plugins

    for name, node in data_sets.items():
        if plugins.from_plugin(node):
            cs.store(group="data", name=name, node=node)
    if entry_points(group="attnexp.attention"):
        from attnexp.attention.registry import registered

        for name, cls in registered().items():
            if plugins.from_plugin(cls):
                cs.store(group="attention", name=name, node=AttentionConfig(name=name))


def compose(overrides: list[str], out_dir: str | Path = "unused", config_name: str = "config"):
    """The config `attnexp train OVERRIDES` would run, for scripts, notebooks and tests: same conf
    dir, schemas and defaults; `paths.output_dir` set to `out_dir` (Hydra's run dir in the CLI).
    `config_name="eval"`: conf/eval.yaml, `attnexp eval`'s (the same groups and its own keys)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict, read_write

    from attnexp.compat.hydra import JOB

    register_schemas()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3", job_name=JOB):  # as Hydra's run names it
        cfg = hydra_compose(config_name, overrides=list(overrides), return_hydra_config=True)
        with read_write(cfg), open_dict(cfg):
            cfg.paths.output_dir = str(out_dir)
            cfg.hydra.runtime.output_dir = str(out_dir)
        HydraConfig.instance().set_config(cfg)  # lets ${hydra:...} interpolations resolve
    return cfg
