"""What attnexp takes from Hydra's internals (hydra._internal): its own command-line parser, the
config search path it builds, and the basic sweeper's expansion of a sweep into jobs, so attnexp's
checks read a command line exactly as Hydra will. tests/unit/test_private_apis.py holds them to the
installed Hydra."""

from __future__ import annotations


def args_parser():
    """Hydra's argparse parser (-m, --cfg, --info, --config-dir and the overrides)."""
    from hydra._internal.utils import get_args_parser

    return get_args_parser()


def config_search_path(conf_dir: str):
    """The search path Hydra builds for a primary config folder (ConfigSearchPathImpl)."""
    from hydra._internal.utils import create_config_search_path

    return create_config_search_path(conf_dir)


def sweep_jobs(parsed_overrides: list) -> list[list[str]]:
    """Hydra's basic sweeper's cross product of parsed overrides: each job's override strings."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    return [job for batch in BasicSweeper.split_arguments(parsed_overrides, None) for job in batch]


def config_loader(search_path):
    """Hydra's config loader over a search path (what answers glob() in a sweep's overrides)."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    return ConfigLoaderImpl(config_search_path=search_path)
