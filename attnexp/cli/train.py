"""`python -m attnexp train [-m] [overrides]`: the command line checked in one line, Hydra's run or
multirun of `attnexp.training.fit.train`, what each job prints, and the exit code (cli/exits.py)."""

from __future__ import annotations

import logging
import os
import re
import shlex
import sys
import time
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path

from omegaconf import read_write

from attnexp.cli.exits import EXIT, config_error, disk_is_full, exit_code, one_line_failure, stopped_at_start
from attnexp.cli.sweep_end import finish_sweep, forget_refusals, nothing_ran, say_refused
from attnexp.config import ConfigError
from attnexp.config.checks import unwritable
from attnexp.config.paths import conf_dir, write_whole
from attnexp.launch.compose import register_resolvers, register_schemas, with_config_dir
from attnexp.results import summary
from attnexp.results.summary import Status

log = logging.getLogger("attnexp")
register_resolvers()  # a job run in another process (submitit) resolves its folder name with them


# What lightning-hydra-template users type for "none" of a group; Hydra refuses a null group choice
NULL_GROUPS = {"logger=null": "logger=none", "logger=[]": "logger=none"}
RERUN = ("attnexp does not take Hydra's --experimental-rerun: it unpickles the file, and a pickle can run any code; "
         "rerun a run with the overrides in its .hydra/overrides.yaml, or continue it with hydra.run.dir=DIR resume=auto")
PRIMARY = ("attnexp train composes its own config.yaml, which --config-name (-cn) and --config-path (-cp) would replace; "
           "put your settings in an experiment beside attnexp's: --config-dir DIR experiment=NAME (docs/extending.md)")


def train_cli(argv: list[str], started: float | None = None) -> int:
    """Exit codes: cli/exits.py. A single run's code is its own; a sweep's is 0 when every job
    completed, else 1. A stop signal ends either with the signal's code and a line saying how to
    resume."""
    register_schemas()
    try:
        argv, plan = planned(argv)
    except ConfigError as e:
        print(f"attnexp: config error: {e}", file=sys.stderr)
        return EXIT[Status.CONFIG_ERROR]
    flags, multirun, overrides = plan.flags, plan.multirun, plan.overrides
    if flags.help or flags.hydra_help or flags.shell_completion:  # Hydra answers these itself
        sys.argv = ["attnexp train", *flag_tokens(argv, overrides), *overrides]
        start_hydra(Launch(plan.again, multirun, started), None)
        return 0
    code = check_before_hydra(plan)
    if code is not None:
        return code
    if plan.sweeps_unasked:  # hydra.mode=MULTIRUN in a config: planned as -m
        return train_cli(["-m", *argv], started)
    # Lightning re-runs this command line for each extra DDP process (sys.argv, which Hydra needs
    # without the subcommand): this tells `python -m attnexp <overrides>` that it is a train.
    os.environ["ATTNEXP_SUBCOMMAND"] = "train"
    sweep_root = None
    if multirun:
        argv, sweep_root = sweep_arguments(argv, plan)
    sys.argv = ["attnexp train", *(argv if multirun else [*flag_tokens(argv, overrides), *overrides])]
    if multirun:
        from attnexp.launch.sweeps import adapt_submitit

        adapt_submitit()
    if sweep_root:
        forget_refusals(sweep_root)  # an earlier launch's are not this one's
    start_hydra(Launch(plan.again, multirun, started, plan.hydra_subdir if multirun else None), plan.mode)
    if sweep_root and nothing_ran(sweep_root, plan.hydra_subdir):
        return 0  # an Optuna study that already had its trials: said so, with its best; no sweep folder
    return finish_sweep(sweep_root, plan.again, plan.hydra_subdir) if sweep_root else 0


def planned(argv: list[str]):
    """(the command line without its passwords, its Plan); a ConfigError for a flag Hydra's parser refuses
    or one attnexp does not take."""
    from attnexp.config.secrets import take_passwords
    from attnexp.launch.plan import Plan

    argv, problem = take_passwords([NULL_GROUPS.get(a, a) for a in argv])  # before Hydra writes any override down
    plan = None if problem else Plan.of(argv)
    if problem or plan.flags.experimental_rerun or plan.flags.config_name or plan.flags.config_path:
        raise ConfigError(problem or (RERUN if plan.flags.experimental_rerun else PRIMARY))
    return argv, plan


def check_before_hydra(plan) -> int | None:
    """The command line composed once and checked (launch/command_line.precheck fills `plan`), its folder
    writable and not another run's: None, or the exit code after one line."""
    from attnexp.config.secrets import hide_password
    from attnexp.launch.command_line import precheck

    flags, multirun, overrides = plan.flags, plan.multirun, plan.overrides
    try:  # --cfg, --info: checked as a run would be
        checked = with_config_dir(overrides, flags.config_dir)
        from attnexp.results.folder import rank_zero

        # a DDP child of a study's job runs that job's overrides (hparams_search=optuna) without -m: not the user's command
        problem = precheck(checked, multirun, training=not (flags.cfg or flags.info) and rank_zero(), plan=plan)
        if not problem and multirun and (flags.cfg or flags.info):  # Hydra's own answer was a ValueError traceback
            problem = (f"{'--cfg' if flags.cfg else '--info'} shows one run's config, and Hydra takes it without -m: "
                       f"drop -m to see the first job's (or give each job's settings without commas)")
        folder = None if problem else plan.folder  # the composed folder's interpolations resolved, or one line
    except ConfigError as e:
        problem = str(e)
    if problem:
        print(f"attnexp: config error: {hide_password(problem)}", file=sys.stderr)
        return EXIT[Status.CONFIG_ERROR]
    if plan.sweeps_unasked:
        return None  # train_cli plans it again as -m, its folders with it
    problem = unwritable(folder, plan.folder_key)
    if problem:
        print(f"attnexp: {problem}", file=sys.stderr)
        return EXIT[Status.FAILED]
    problem = folder_owned(plan)
    if problem:  # said before Hydra writes .hydra/ into a folder another run owns
        print(f"attnexp: {problem}", file=sys.stderr)
        return EXIT[Status.CONFIG_ERROR]
    return None


def folder_owned(plan) -> str | None:
    """A single run given a literal hydra.run.dir that a live run holds, that holds an earlier run's
    checkpoints while this one does not resume, or whose completed run resume=auto would take for another
    model: one line (attnexp.results.folder; completed_other), else None."""
    from attnexp.results import folder

    if plan.multirun or not plan.literal or not folder.rank_zero():
        return None
    return (folder.taken(plan.folder) or folder.earlier_run(plan.folder, plan.resume)
            or completed_other(plan.folder, plan.resume, plan.run))


def completed_other(folder: Path, resume: str | None, run) -> str | None:
    """One line when resume=auto would take `folder`'s completed run for `run` (its Run) though that
    run's checkpoint holds another model (an unfinished run's is checked as training resumes), else None."""
    if resume != "auto" or run is None or summary.read_status(Path(folder)) != Status.COMPLETED:
        return None
    from attnexp.model import checkpoints

    last = checkpoints.newest(folder)
    return None if last is None else checkpoints.mismatch(checkpoints.load(last, "resume"), asdict(run.model),
                                                          asdict(run.attention), asdict(run.task), "resume", last)


def sweep_arguments(argv: list[str], plan) -> tuple[list[str], Path]:
    """The multirun's command line with what its jobs need (attnexp.launch.sweeps), and its folder
    (plan.sweep_root), given to Hydra as hydra.sweep.dir unless the command line named it whole."""
    from attnexp.launch.sweeps import job_overrides

    root = plan.sweep_root
    argv = [*flag_tokens(argv, plan.overrides), *plan.overrides, *job_overrides(plan)]  # Hydra's parser: flags, then overrides
    return (argv if plan.literal else [*argv, f"hydra.sweep.dir={root}"]), root


def flag_tokens(argv: list[str], overrides: list[str]) -> list[str]:
    """The command line's flags (`-m`, `--cfg job`, `-p KEY`, `--config-dir DIR`) without its overrides:
    overrides appended after a flag's value (`--cfg job -p attention hydra.sweep.dir=...`) were refused by
    Hydra's argparse as unrecognized arguments, so the command line is rebuilt as flags, then overrides."""
    left = list(overrides)
    out = []
    for a in argv:
        if a in left:
            left.remove(a)
        else:
            out.append(a)
    return out


@dataclass
class Launch:
    """What each job of this command is given, and what this process saw of a sweep's jobs."""

    again: list[str]  # what a command that continues this one repeats (Plan.again)
    multirun: bool
    started: float | None  # when the command started
    hydra_subdir: str | None = None  # a sweep job's .hydra/, written by `job` once the folder is the job's
    ran: list[Path] = field(default_factory=list)  # the jobs this process ran (Hydra's basic launcher: in turn)


def start_hydra(launch: Launch, mode) -> None:
    """Hydra on sys.argv, as @hydra.main starts it, with the run mode the plan composed (compat/hydra.run:
    one composition fewer than @hydra.main's); each job is `job`."""
    from attnexp.compat.hydra import run

    run(lambda cfg: job(cfg, launch), sys.argv[1:], mode, str(conf_dir()))


def job(cfg, launch: Launch) -> float | None:
    """One run (one job of a sweep): what Hydra's sweeper gets back is the run's best monitored
    value (Optuna's objective), or None. A sweep's job refused its folder says so where the sweep's end
    reads it (cli/sweep_end.py: the job may run in another process, submitit's)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from attnexp.compat.hydra import job_files
    from attnexp.launch.load import job_context
    from attnexp.results.folder import FolderTaken, owned

    out = Path(HydraConfig.get().runtime.output_dir)
    sweep, started = HydraConfig.get().mode == RunMode.MULTIRUN, launch.started
    if sweep:  # a job's times count from its own start: the first from the command's, the next from theirs
        started = started if not launch.ran else time.time()
        launch.ran.append(out)
    try:
        with owned(out, cfg.get("resume"), job_context() if sweep else None):  # one run a folder, one folder a run
            if launch.hydra_subdir:  # Hydra's files of the job, written only into a folder that is the job's
                for path, text in job_files(cfg, out, launch.hydra_subdir).items():
                    write_whole(path, text)
            return run_job(cfg, out, sweep, launch.again, launch.multirun, started)
    except FolderTaken as e:
        if not sweep:
            print(f"attnexp: {e}", file=sys.stderr)
            raise SystemExit(EXIT[Status.CONFIG_ERROR]) from None
        say_refused(out, Path(HydraConfig.get().sweep.dir), e)
        return None


def run_job(cfg, out: Path, sweep: bool, again: list[str], multirun: bool, started: float | None) -> float | None:
    from attnexp.launch.load import job_context, load_run
    from attnexp.training.stops import Interrupted, StopSignals

    # A stop signal from here until train() takes over (the checks, the Lightning import: seconds, more on a
    # loaded node) is this job's, not submitit's alone: SLURM's warning there must leave a record, or a job
    # submitit does not requeue ends "completed successfully" with none
    with StopSignals() as early:
        try:
            try:
                run = load_run(cfg, started)  # before the slow Lightning import
            except ConfigError as e:
                summary.write(out / summary.NAME, summary.error_record(out, Status.CONFIG_ERROR, str(e), job_context(started)))
                return config_error(e, out, sweep)
            if run.resume == "auto" and summary.read_status(out) == Status.COMPLETED:  # a finished job of a re-launched sweep
                return completed_already(run, out, sweep)
            from attnexp.training.fit import train
        except Interrupted as e:
            stopped_at_start(out, e.signame, early, job_context(started))

    if os.environ.get("LOCAL_RANK", "0") == "0":  # where to point TensorBoard while it trains (not once per rank)
        print(f"attnexp: training in {out}", flush=True)

    try:
        with one_job(out) if sweep else nullcontext():
            result = train(run)
    except ConfigError as e:  # bad input found while loading the data
        return config_error(e, out, sweep)
    except Interrupted as e:
        print(f"attnexp: stopped by {e.signame} before training started in {out}", file=sys.stderr)
        raise SystemExit(EXIT[e.signame]) from None
    except Exception as e:  # in a sweep one failed job must not take the others with it
        from attnexp.training.stops import disk_full, unwritable

        if disk_full(e):
            return disk_is_full(out, sweep)
        if said := unwritable(e):  # the record says it too
            return one_line_failure(said, sweep)
        if not sweep:
            raise
        log.exception("run %s failed", out)
        return None
    return None if result is None else conclude(result, again, multirun, out, sweep)  # None: another DDP rank


def completed_already(run, out: Path, sweep: bool) -> float | None:
    """resume=auto on a completed run: not trained again, its value given back (a re-launched sweep's
    finished job). A model other than these settings build is refused as resume=auto refuses it on an
    unfinished run; a budget longer than the run trained is said, with the way to train it further."""
    from attnexp.model import checkpoints
    from attnexp.results.folder import FolderTaken

    if sweep and (problem := completed_other(out, "auto", run)):  # a single run's was refused before Hydra
        raise FolderTaken(problem)  # as a folder is refused: a sweep's end counts it, the folder's record is kept
    done, t = summary.read(out / summary.NAME), run.trainer
    epochs, steps = done.get("epochs") or 0, done.get("steps") or 0
    stopped = (done.get("early_stopping") or {}).get("stopped_epoch")
    if not stopped and ((t.max_epochs or -1) > epochs or (t.max_steps or -1) > steps) and (last := checkpoints.newest(out)):
        print(f"attnexp: {out} already completed ({epochs} epochs, {steps} steps); resume=auto does not train a "
              f"completed run again: to train it further, give resume={last}", file=sys.stderr)
    log.info("%s already completed; not trained again (resume=auto)", out)
    return sweep_value(done)


@contextmanager
def one_job(out: Path):
    """One job of a sweep, as Lightning's DDP launcher should see it, and nothing of it left for the
    next job. The launcher starts the other ranks by running `sys.argv` again with
    `hydra.run.dir=<HydraConfig run.dir>` appended: left as the sweep's, that was `-m <every job's
    values>` (attnexp: "unknown command '-m'"; Lightning then SIGKILLed the sweep), so here it is this
    job's own command line, as a single run, in this job's folder: its --config-dir and Hydra overrides
    too (without them rank 1 could not compose a user's experiment), and hydra.mode=RUN (a config that
    sets MULTIRUN made rank 1 start a sweep of its own). Afterwards the job's other ranks are
    waited for and no longer watched (Lightning's watcher SIGKILLed the sweep when a failed job's
    rank exited non-zero), and the environment the launcher set (LOCAL_RANK, WORLD_SIZE,
    MASTER_PORT: the next job would take itself for a rank started from outside and wait for peers)
    and its process group are undone."""
    from hydra.core.hydra_config import HydraConfig

    hc = HydraConfig.instance().cfg
    argv, env = list(sys.argv), dict(os.environ)
    conf_dir = [f"--config-dir={s.path}" for s in hc.hydra.runtime.config_sources if s.provider == "command-line"]
    sys.argv = ["attnexp train", *conf_dir, *hc.hydra.overrides.hydra, *hc.hydra.overrides.task, "hydra.mode=RUN"]
    with read_write(hc), read_write(hc.hydra), read_write(hc.hydra.run):
        hc.hydra.run.dir = str(out)
    try:
        yield
    finally:
        from attnexp.compat.lightning import release_ddp_children

        release_ddp_children()
        sys.argv = argv
        os.environ.clear()
        os.environ.update(env)
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()


def conclude(result: dict, again: list[str], multirun: bool, out: Path, sweep: bool) -> float | None:
    """The block a run ends with; a stopped run says how to resume it and ends the command (a sweep
    too: its next job would be stopped as well); a diverged single run exits with its code."""
    from attnexp.results.ending import end_of_run

    print(end_of_run(result), flush=True)
    if result["status"] == Status.INTERRUPTED:
        say_stopped(result, again, multirun, out)
        raise SystemExit(exit_code(Status.INTERRUPTED, result.get("signal")))
    if result["status"] == Status.DIVERGED:
        print(f"attnexp: diverged in {out}: {result['error']}", file=sys.stderr)
        if not sweep:
            raise SystemExit(EXIT[Status.DIVERGED])
    return sweep_value(result)


def say_stopped(result: dict, again: list[str], multirun: bool, out: Path) -> None:
    again = [o for o in again if not o.startswith(("resume=", "hydra.run.dir=", "hydra.sweep.dir="))]
    where = shlex.quote(f"hydra.sweep.dir={hydra_quote(result['sweep'])}" if result.get("sweep")
                        else f"hydra.run.dir={hydra_quote(str(out))}")
    cmd = " ".join(["python -m attnexp train", *(["-m"] if multirun else []), *map(shlex.quote, again), where, "resume=auto"])
    ckpt = result.get("resume_checkpoint") or "none yet (it starts afresh)"
    print(f"attnexp: {result.get('error')}; checkpoint: {ckpt}. Resume with: {cmd}", file=sys.stderr)


def hydra_quote(value: str) -> str:
    """`value` as Hydra's override grammar reads it back: as it is where it holds only plain
    characters, else in double quotes (a folder named `run (copy)` pasted bare is a grammar error)."""
    if re.fullmatch(r"[\w./~+@%:-]+", value):
        return value
    # Hydra's quoted strings: a quote is escaped, and so are the backslashes just before a quote or the end
    escaped = re.sub(r'(\\*)"', lambda m: m.group(1) * 2 + '\\"', value)
    return '"' + re.sub(r"(\\+)$", lambda m: m.group(1) * 2, escaped) + '"'


def sweep_value(result: dict) -> float | None:
    """What a Hydra sweeper (Optuna) optimizes: the best monitored value of the run."""
    return summary.objective(result, (result["metrics"].get("best") or {}).get("monitor"))
