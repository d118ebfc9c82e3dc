"""What attnexp takes from Hydra's internals (hydra._internal): its own command-line parser, the
config search path it builds, and the basic sweeper's expansion of a sweep into jobs, so attnexp's
checks read a command line exactly as Hydra will. tests/unit/test_private_apis.py holds them to the
installed Hydra."""

from __future__ import annotations

import os
from pathlib import Path

JOB = "train"  # the job's name (hydra.job.name: its log file, ${hydra.job.name}), in Hydra's run and in compose


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


def run(task_function, argv: list[str], mode, conf_dir: str) -> None:
    """Hydra's run or multirun of `task_function` on the command line `argv`, configs in `conf_dir`, as
    @hydra.main starts it (hydra._internal.utils._run_hydra: the search path, --config-dir, the app,
    errors reported as Hydra reports them), less the composition it makes only to read `hydra.mode`
    (Hydra.get_mode): the caller has composed that config already and gives its `hydra.mode`. The flags
    Hydra answers itself (--help, --hydra-help, --cfg, --info, --resolve, completion) go to _run_hydra."""
    from hydra import version
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import _run_app, _run_hydra, run_and_report
    from hydra.core.config_search_path import SearchPathQuery
    from hydra.core.global_hydra import GlobalHydra

    parser = args_parser()
    args = parser.parse_args(argv)
    version.setbase("1.3")
    if args.help or args.hydra_help or args.shell_completion or args.cfg or args.info or args.resolve:
        return _run_hydra(args, parser, task_function, conf_dir, "config")
    path = config_search_path(conf_dir)
    if args.config_dir is not None:  # the caller checked that it is a folder
        path.prepend("command-line", f"file://{os.path.abspath(args.config_dir)}", SearchPathQuery(provider="schema"))
    hydra = run_and_report(lambda: Hydra.create_main_hydra2(task_name=JOB, config_search_path=path))
    try:
        _run_app(run=not args.multirun, multirun=args.multirun, mode=mode, hydra=hydra, config_name="config",
                 task_function=task_function, overrides=args.overrides)
    finally:
        GlobalHydra.instance().clear()


def job_files(task_cfg, out, subdir: str) -> dict[Path, str]:
    """What Hydra's run_job writes into a job's output_subdir (hydra.core.utils.run_job: config.yaml,
    hydra.yaml, overrides.yaml): path -> YAML, for the job to write once its folder `out` is its own (a
    sweep's jobs run with hydra.output_subdir=null, so that Hydra never overwrites the files of a run the
    job then refuses). The folder is made here."""
    import copy

    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf, read_write

    hc = copy.deepcopy(HydraConfig.instance().cfg)
    with read_write(hc), read_write(hc.hydra):
        hc.hydra.output_subdir = subdir  # as Hydra would have had it
    folder = Path(out) / subdir
    folder.mkdir(parents=True, exist_ok=True)
    return {folder / name: OmegaConf.to_yaml(node)
            for name, node in (("config.yaml", task_cfg), ("hydra.yaml", hc), ("overrides.yaml", hc.hydra.overrides.task))}
