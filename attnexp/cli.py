"""`python -m attnexp <command>` and the `attnexp` console script."""

from __future__ import annotations

import logging
import os
import shlex
import sys
from datetime import datetime
from pathlib import Path

USAGE = """usage: python -m attnexp <command> [args]

commands:
  train [overrides]   train one run, or a sweep with -m (Hydra); `train --help` lists config groups
  variants            the attention variants: masks, backends, what their weights are
  maps ckpt=PATH text="..." [out=DIR]
                      render the attention maps of a trained checkpoint for any text
  compare [DIR ...] [sort=KEY] [csv=PATH]
                      runs side by side from their summary.json (default: the newest sweep)

examples:
  python -m attnexp train attention=causal
  python -m attnexp train -m attention=causal,bidirectional model.n_layers=2,4
  python -m attnexp compare
"""

log = logging.getLogger("attnexp")


def conf_dir() -> Path:
    """conf/ of a source checkout (editable install), else the copy packaged with a wheel."""
    here = Path(__file__).resolve().parent
    for cand in (here.parent / "conf", here / "conf"):
        if (cand / "config.yaml").is_file():
            return cand
    raise FileNotFoundError("attnexp's conf/ folder is missing; reinstall with `pip install -e .` from the repo")


def register_schemas() -> None:
    """Put the typed schemas in Hydra's ConfigStore; conf/ files inherit them (`/x_schema@_here_`,
    `optim_schema@optim`), so every key exists on every option and a wrong type fails at compose time."""
    from hydra.core.config_store import ConfigStore

    from attnexp.config import (AttentionConfig, CheckpointConfig, MapsConfig, ModelConfig, OptimConfig,
                                TaskConfig)
    from attnexp.data.configs import SCHEMAS

    cs = ConfigStore.instance()
    for name, node in [("attention", AttentionConfig), ("model", ModelConfig), ("task", TaskConfig),
                       ("optim", OptimConfig), ("maps", MapsConfig), ("checkpoint", CheckpointConfig)]:
        cs.store(name=f"{name}_schema", node=node)
    for data_name, node in SCHEMAS.items():
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


def train_cli(argv: list[str]) -> int:
    """Exit codes: 0 completed (every job of a sweep), 1 a run failed (in a sweep: any job failed,
    diverged or had a config error), 2 a config or input error, 3 the loss diverged, 130 / 143
    stopped by SIGINT / SIGTERM (a checkpoint of that step is kept; the line printed says how to resume)."""
    import hydra
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from attnexp.config import ConfigError
    from attnexp.overrides import precheck
    from attnexp.run import hydra_context, load_run
    from attnexp.stops import EXIT, Interrupted
    from attnexp.summary import error_record, write_json

    from attnexp.sweeps import SWEPT_ENV, sweep_dirname_overrides, swept_keys

    register_schemas()
    multirun = any(a in ("-m", "--multirun") for a in argv)
    overrides = [a for a in argv if not a.startswith("-")]
    if all(a in ("-m", "--multirun") for a in argv if a.startswith("-")):  # not --cfg, --help, ...: Hydra's own
        problem = precheck(overrides, multirun)
        if problem:
            print(f"attnexp: config error: {problem}", file=sys.stderr)
            return EXIT["config_error"]
    # Lightning re-runs this command line for each extra DDP process (sys.argv, which Hydra needs
    # without the subcommand): this tells `python -m attnexp <overrides>` that it is a train.
    os.environ["ATTNEXP_SUBCOMMAND"] = "train"
    if multirun:
        os.environ[SWEPT_ENV] = ",".join(swept_keys(overrides))
        parallel = parallel_jobs(overrides)
        if parallel:
            os.environ["ATTNEXP_PARALLEL"] = str(parallel)
        argv = [*argv, *sweep_dirname_overrides(overrides)]
    sweep_root = None
    if multirun:  # named here, not by Hydra, so this process knows it when the jobs ran elsewhere (submitit)
        given = [o.split("=", 1)[1] for o in overrides if o.startswith("hydra.sweep.dir=")]
        sweep_root = Path(given[0] if given else f"multirun/{datetime.now():%Y-%m-%d/%H-%M-%S}").resolve()
        if not given:
            argv = [*argv, f"hydra.sweep.dir={sweep_root}"]

    def say_stopped(summary: dict, out: Path) -> None:
        again = [o for o in overrides if not o.startswith(("resume=", "hydra.run.dir=", "hydra.sweep.dir="))]
        where = f"hydra.sweep.dir={shlex.quote(summary['sweep'])}" if summary.get("sweep") else f"hydra.run.dir={shlex.quote(str(out))}"
        cmd = " ".join(["python -m attnexp train", *(["-m"] if multirun else []), *map(shlex.quote, again), where, "resume=auto"])
        ckpt = summary.get("resume_checkpoint") or "none yet (it starts afresh)"
        print(f"attnexp: {summary.get('error')}; checkpoint: {ckpt}. Resume with: {cmd}", file=sys.stderr)

    @hydra.main(config_path=str(conf_dir()), config_name="config", version_base="1.3")
    def task(cfg):
        hc = HydraConfig.get()
        out = Path(hc.runtime.output_dir)
        sweep = hc.mode == RunMode.MULTIRUN
        try:
            run = load_run(cfg)  # before the slow Lightning import
        except ConfigError as e:
            write_json(out / "summary.json", error_record(out, "config_error", str(e), *hydra_context()))
            if not sweep:
                print(f"attnexp: config error: {e}", file=sys.stderr)
                raise SystemExit(EXIT["config_error"])
            log.error("config error in %s: %s", out, e)
            return None
        done = previous_result(run)
        if done is not None:  # resume=auto on a finished job of a re-launched sweep: nothing to redo
            return done
        from attnexp.train import train

        try:
            summary = train(run)
        except ConfigError as e:  # bad input found while loading the data
            if not sweep:
                print(f"attnexp: config error: {e}", file=sys.stderr)
                raise SystemExit(EXIT["config_error"]) from None
            log.error("config error in %s: %s", out, e)
            return None
        except Interrupted as e:
            print(f"attnexp: stopped by {e.signame} before training started in {out}", file=sys.stderr)
            raise SystemExit(EXIT[e.signame]) from None
        except Exception as e:  # in a sweep one failed job must not take the others with it
            if not sweep:
                raise
            log.exception("run %s failed", out)
            return None
        if summary is None:  # another rank of a distributed run: rank 0 reports
            return None
        from attnexp.console import report

        print(report(summary), flush=True)
        if summary["status"] == "interrupted":  # a stop signal ends a sweep too: the next job would be killed as well
            say_stopped(summary, out)
            raise SystemExit(EXIT[summary.get("signal") or "SIGTERM"])
        if summary["status"] == "diverged":
            print(f"attnexp: diverged in {out}: {summary['error']}", file=sys.stderr)
            if not sweep:
                raise SystemExit(EXIT["diverged"])
        return objective(summary)  # pruned, diverged: None

    sys.argv = ["attnexp train", *argv]
    task()
    return finish_sweep(sweep_root) if sweep_root else 0


def finish_sweep(root: Path) -> int:
    """The sweep's table (results.md, .csv) and its failures, read from the jobs' summary.json
    files: the jobs may have run in other processes (submitit). A job folder without a summary
    (its process died before writing one) counts as failed."""
    import json

    from attnexp.compare import CompareError, write_sweep_table

    failures = []
    for job in sorted(p.parent for p in root.glob("*/.hydra")):
        try:
            s = json.loads((job / "summary.json").read_text())
        except (OSError, ValueError):
            failures.append(f"{job.name}: no summary.json (its process died)")
            continue
        if s.get("status") in ("failed", "diverged", "config_error"):
            failures.append(f"{job.name}: {s['status']}: {s.get('error') or ''}")
    try:
        table = write_sweep_table(root)
        print(f"attnexp: the sweep's runs side by side: {table}; a report: python -m attnexp compare "
              f"{shlex.quote(str(root))} report={shlex.quote(str(root))}/report.html", flush=True)
    except CompareError:
        pass
    if failures:
        print(f"attnexp: {len(failures)} run(s) of the sweep failed (see their summary.json):", file=sys.stderr)
        for f in failures:
            print(f"  {f}", file=sys.stderr)
        return EXIT["failed"]
    return 0


def parallel_jobs(overrides: list[str]) -> int | None:
    """How many jobs a launcher that runs them side by side on this machine (submitit_local) starts
    at once: the sweep's jobs, or the Optuna sweeper's n_jobs. None for one at a time."""
    from attnexp.overrides import compose_checked, sweep_jobs

    try:
        jobs = sweep_jobs(overrides)
        cfg = compose_checked([o for o in overrides if "," not in o.partition("=")[2] or o.startswith("hydra")])
    except Exception:
        return None
    if "LocalLauncher" not in str(cfg.hydra.launcher.get("_target_", "")):
        return None
    n_jobs = cfg.hydra.sweeper.get("n_jobs")
    return int(n_jobs) if n_jobs else len(jobs)


def objective(summary: dict) -> float | None:
    """What a Hydra sweeper (Optuna) optimizes: the best monitored value of the run."""
    return (summary["metrics"].get("best") or {}).get("value")


def previous_result(run) -> float | None:
    """With resume=auto, a job whose summary already says completed is not trained again."""
    import json

    path = run.out_dir / "summary.json"
    if run.resume != "auto" or not path.is_file():
        return None
    try:
        s = json.loads(path.read_text())
    except ValueError:
        return None
    if s.get("status") != "completed":
        return None
    log.info("%s already completed; not trained again (resume=auto)", run.out_dir)
    return objective(s)


def variants_cli(argv: list[str]) -> int:
    from attnexp import attention

    rows = attention.matrix()
    cols = ["variant", "masks", "backends", "rows", "positions", "about"]
    width = {c: max(len(c), *(len(r[c]) for r in rows)) for c in cols}
    print("  ".join(c.ljust(width[c]) for c in cols))
    print("  ".join("-" * width[c] for c in cols))
    for r in rows:
        print("  ".join(r[c].ljust(width[c]) for c in cols))
    print("\nWhere a variant has no fused backend:")
    for r in rows:
        if r["why"]:
            print(f"  {r['variant']}: {r['why']}")
    print("\nSelect with attention=<variant> (conf/attention/*.yaml), override with attention.mask=... attention.backend=...")
    print("flex trains on CUDA only (forward-only on CPU). rows: what a row of the weights sums to (1: a distribution "
          "over the allowed keys; at most 1: some mass goes to no token; signed: a difference of maps). Every variant "
          "hands back its weights from the eager path of the same module.")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd == "train":
        return train_cli(rest)
    if os.environ.get("ATTNEXP_SUBCOMMAND") == "train" and "=" in cmd:  # a DDP child Lightning started
        return train_cli(argv)
    if cmd == "variants":
        return variants_cli(rest)
    if cmd == "maps":
        from attnexp.maps.cli import maps_cli

        return maps_cli(rest)
    if cmd == "compare":
        from attnexp.compare import compare_cli

        return compare_cli(rest)
    print(f"attnexp: unknown command {cmd!r}; choose one of: train, variants, maps, compare\n\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
