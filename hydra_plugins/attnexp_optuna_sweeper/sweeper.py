"""`hydra/sweeper=attnexp_optuna`: trials asked of an Optuna study, launched by the configured
Hydra launcher in batches of `n_jobs`, told the value each job's summary.json reports.

Search spaces use Hydra's sweep syntax, in `hydra.sweeper.params` or on the command line:
`optim.lr='tag(log, interval(1e-4, 1e-2))'`, `model.d_model='choice(64, 128)'`,
`model.n_layers='range(1, 5)'`."""

# No `from __future__ import annotations` here: Hydra's plugin scan executes this module outside
# sys.modules, where `dataclasses` cannot resolve a string annotation. Its helpers are `_private`
# modules, which the scan skips, so they are imported once.
import inspect
import json
import logging
import os
import socket
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, Override, RangeSweep
from hydra.core.plugins import Plugins
from hydra.errors import CompactHydraException
from hydra.plugins.sweeper import Sweeper
from omegaconf import DictConfig, OmegaConf

from attnexp.config import higher_is_better, layout
from attnexp.config.paths import write_whole
from attnexp.config.study import StudyStorage
from hydra_plugins.attnexp_optuna_sweeper._study_storage import (
    SweepError,
    check,
    check_study_name,
    dashboard_command,
    schema_lock,
)
from hydra_plugins.attnexp_optuna_sweeper._trials import Heartbeat, counted, launch_seed

log = logging.getLogger(__name__)


@dataclass
class AttnexpOptunaSweeperConf:
    _target_: str = "hydra_plugins.attnexp_optuna_sweeper.sweeper.OptunaSweeper"
    study_name: str = "attnexp"
    # a study resumes from it; optuna-dashboard reads it. sqlite:///FILE (one machine), a database server
    # (postgresql+psycopg://USER@HOST:PORT/DB, the password in PGPASSWORD: workers on many nodes), or journal:FILE (Optuna's
    # JournalStorage: a file on a shared filesystem, no server; no heartbeats)
    storage: str | None = "sqlite:///optuna.db"
    direction: str = "auto"  # auto: maximize for accuracies and F1, minimize for losses (checkpoint.monitor)
    n_trials: int = 20  # in all, counting the trials the storage already holds
    n_jobs: int = 1  # trials launched at once (a parallel launcher runs them side by side)
    sampler: str = "tpe"  # tpe | random
    # the sampler's seed: each launch on a study draws its own from this one, the host, the process and
    # the time (launches side by side asked the same settings when all used it as it is); every launch's
    # seed is recorded in the study (user attribute launch:<host>:<pid>), so a study can be replayed
    seed: int | None = 0
    pruner: str = "median"  # median | none (jobs report per-epoch values to the study in `storage`)
    n_startup_trials: int = 3  # trials that run to the end before any is pruned
    n_warmup_steps: int = 1  # epochs a trial always gets
    # Trials carry a heartbeat in the storage while their launch is alive (Optuna's own mechanism);
    # one silent for grace_period seconds belongs to a launch that was killed: it is failed and its
    # settings asked again. Two launches on one study each leave the other's live trials alone.
    heartbeat_interval: int = 10
    grace_period: int = 60
    params: dict[str, str] = field(default_factory=dict)
    # Set by the sweeper for each job it launches (hydra.sweeper.trial=N): the trial the job runs
    # for, which the job opens from `storage` to report per-epoch values and be pruned; and the trial
    # whose folder it runs in (hparams_search=optuna's trial<origin>/): its own, or for a dead launch's
    # trial asked again the first that ran those settings, so the retry continues its checkpoints.
    trial: int | None = None
    origin: int | None = None


ConfigStore.instance().store(group="hydra/sweeper", name="attnexp_optuna", node=AttnexpOptunaSweeperConf,
                             provider="attnexp")


def distribution(override: Override):
    """The sweep value of `key=<sweep>` as a function of an Optuna trial."""
    key, v = override.get_key_element(), override.value()
    if isinstance(v, ChoiceSweep):
        choices = [c for c in v.list]
        return lambda t: t.suggest_categorical(key, choices)
    if isinstance(v, RangeSweep):
        if all(isinstance(x, int) for x in (v.start, v.stop, v.step)):
            return lambda t: t.suggest_int(key, v.start, v.stop - v.step, step=v.step)
        values = list(OverridesParser.create().parse_override(f"{key}={override.input_line.split('=', 1)[1]}").sweep_iterator())
        return lambda t: t.suggest_categorical(key, values)
    if isinstance(v, IntervalSweep):
        log_scale = "log" in v.tags
        if isinstance(v.start, int) and isinstance(v.end, int):
            return lambda t: t.suggest_int(key, v.start, v.end, log=log_scale)
        return lambda t: t.suggest_float(key, float(v.start), float(v.end), log=log_scale)
    raise ValueError(f"{key}: Optuna cannot sample {override.input_line!r}; use choice(...), range(...) or "
                     f"interval(...), optionally tag(log, interval(...))")


class OptunaSweeper(Sweeper):
    def __init__(self, **settings: Any):
        self.s = AttnexpOptunaSweeperConf(**settings)
        self.where = StudyStorage.parse(self.s.storage)
        self.job_idx = 0
        self.retried: dict[int, int] = {}  # a trial asked again (its number) -> the first that ran its settings

    def setup(self, *, hydra_context, task_function, config: DictConfig) -> None:
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(hydra_context=hydra_context,
                                                                task_function=task_function, config=config)

    def monitor(self) -> str:
        """The metric each trial reports (checkpoint.monitor): the direction and the study's metric name follow it."""
        return OmegaConf.select(self.config, "checkpoint.monitor") or "val/loss"

    def direction(self) -> str:
        if self.s.direction != "auto":
            return self.s.direction

        return "maximize" if higher_is_better(self.monitor()) else "minimize"

    def study(self):
        optuna = require_optuna()
        check_study_name(self.s.study_name)
        if self.where is not None and self.where.kind != "server":  # SQLite and a journal make the file, not its folder
            self.where.path.parent.mkdir(parents=True, exist_ok=True)
        check(self.where)
        self.launch = f"{socket.gethostname()}:{os.getpid()}"
        seed = launch_seed(self.s.seed, self.launch)
        sampler = (optuna.samplers.RandomSampler(seed=seed) if self.s.sampler == "random"
                   else optuna.samplers.TPESampler(seed=seed, constant_liar=True))  # workers: no two ask alike
        pruner = (optuna.pruners.NopPruner() if self.s.pruner == "none" else
                  optuna.pruners.MedianPruner(n_startup_trials=self.s.n_startup_trials, n_warmup_steps=self.s.n_warmup_steps))
        with schema_lock(self.where):  # launches started at once: one makes Optuna's tables and the study, the others find them
            study = optuna.create_study(study_name=self.s.study_name, storage=self.storage(), sampler=sampler,
                                        pruner=pruner, direction=self.direction(), load_if_exists=True)
            if not study.metric_names:  # optuna-dashboard and study.trials_dataframe() then say "val/loss", not "Objective 0"
                study.set_metric_names([self.monitor()])
        study.set_user_attr(f"launch:{self.launch}", {"seed": seed, "sampler": self.s.sampler, "base_seed": self.s.seed})
        return study

    def storage(self):
        """The Optuna storage `hydra.sweeper.storage` names: an RDB (SQLite, PostgreSQL, MySQL) with
        heartbeats and retries of a dead launch's trials, or a journal file; None: in memory."""
        import optuna

        if self.where is None or self.where.kind == "journal":
            return self.where.optuna() if self.where else None
        # the callback's keyword was renamed in Optuna 4.9 (the old one warns, and goes in 6.0)
        key = ("heartbeat_stale_trial_callback" if "heartbeat_stale_trial_callback" in
               inspect.signature(optuna.storages.RDBStorage).parameters else "failed_trial_callback")
        return self.where.optuna(
            heartbeat_interval=self.s.heartbeat_interval, grace_period=self.s.grace_period,
            engine_kwargs={"pool_pre_ping": True} if self.where.kind == "server" else None,
            **{key: getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback",
                            optuna.storages.RetryFailedTrialCallback)(max_retry=3)})

    def left(self, study) -> int:
        """Trials still to run: n_trials in all, counting the storage's finished trials and those
        other live launches are running; at least the retries waiting to run. Trials of a killed
        launch (no heartbeat for grace_period) are failed first, and their settings queued again."""
        import optuna

        S = optuna.trial.TrialState
        if self.s.storage:
            failed = len(study.get_trials(deepcopy=False, states=(S.FAIL,)))
            optuna.storages.fail_stale_trials(study)
            stale = len(study.get_trials(deepcopy=False, states=(S.FAIL,))) - failed
            if stale:
                log.info("%d trial(s) had stopped (no heartbeat for %d s): their settings run again", stale,
                         self.s.grace_period)
        taken = len(counted(study))
        return max(self.s.n_trials - taken, len(study.get_trials(deepcopy=False, states=(S.WAITING,))))

    def ask(self, study, n: int) -> list:
        """Up to `n` trials for this launch. Launches on one study ask at the same time, so a trial that
        takes the study past n_trials (counted by trial number: Optuna numbers them atomically) is not
        run: it is told FAIL at once and marked `surplus`, and no launch counts it."""
        import optuna

        S = optuna.trial.TrialState
        trials = []
        for _ in range(n):
            trial = study.ask()
            trial.set_user_attr("launch", self.launch)
            trials_now = study.get_trials(deepcopy=False)
            ahead = [t for t in counted(study, trials_now) if t.number < trial.number]
            frozen = next(t for t in trials_now if t.number == trial.number)
            retry = "failed_trial" in frozen.system_attrs  # a dead launch's trial, asked again
            if retry:
                self.retried[trial.number] = int(frozen.system_attrs["failed_trial"])
            if len(ahead) >= self.s.n_trials and not retry:
                trial.set_user_attr("surplus", True)
                study.tell(trial, state=S.FAIL)
                break
            trials.append(trial)
        return trials

    def others_running(self, study) -> int:
        """Trials other live launches are running: a launch with nothing left to ask waits for them, so a
        trial whose launch dies is failed by its silent heartbeat and run again here, not left RUNNING."""
        import optuna

        return len([t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
                    if t.user_attrs.get("launch") != self.launch])

    def sweep(self, arguments: list[str]) -> None:
        parser = OverridesParser.create()
        given = parser.parse_overrides(arguments)
        space = {o.get_key_element(): distribution(o)
                 for o in parser.parse_overrides([f"{k}={v}" for k, v in self.s.params.items()]) + given
                 if o.is_sweep_override()}
        if not space:
            raise ValueError("hydra/sweeper=attnexp_optuna has nothing to search: give hydra.sweeper.params or "
                             "sweep overrides such as optim.lr='tag(log, interval(1e-4, 1e-2))'")
        fixed = [o.input_line for o in given if not o.is_sweep_override()]
        study = self.study()
        left = self.left(study)
        held = len(study.get_trials(deepcopy=False))
        log.info("Optuna study %r (%s, %s, seed %s): %d trial(s) to run, %d already in %s", self.s.study_name,
                 self.direction(), type(study.sampler).__name__, study.user_attrs[f"launch:{self.launch}"]["seed"],
                 max(left, 0), held, self.where.shown if self.where else "memory")
        try:
            ran = self.run_trials(study, fixed, space, left)
        except Exception as e:
            raise self.storage_failed(e) from None
        if ran:
            self.write_results(study)
        else:
            self.say_done(study)

    def storage_failed(self, e: Exception) -> Exception:
        """A journal that could no longer be read while the sweep ran (cut, overwritten, another writer's
        garbage): one line naming it, and where the trials that finished are (their run folders are
        whole); anything else as it was."""
        if self.where is None or self.where.kind != "journal" or isinstance(e, SweepError):
            return e

        first = " ".join(str(e).split())[:100] or type(e).__name__
        sweep = Path(self.config.hydra.sweep.dir)
        return CompactHydraException(
            f"attnexp: the study's journal {self.where.path} could not be read while the sweep ran ({type(e).__name__}: "
            f"{first}); the {self.job_idx} job(s) run so far keep their run folders: python -m attnexp compare {sweep}")

    def run_trials(self, study, fixed: list[str], space: dict, left: int) -> bool:
        """Ask, launch and tell in batches of n_jobs until the study holds n_trials; whether any ran."""
        ran = False
        while True:
            trials = self.ask(study, min(self.s.n_jobs, left)) if left > 0 else []
            if trials:
                batch = [[*fixed, *(f"{k}={suggest(trial)}" for k, suggest in space.items()), *self.where_run(trial.number)]
                         for trial in trials]
                with Heartbeat(study, trials, self.s.heartbeat_interval if self.storage_beats() else 0):
                    returns = self.launcher.launch(batch, initial_job_idx=self.job_idx)
                self.tell(study, trials, returns)
                self.job_idx += len(trials)
                ran = True
            elif self.storage_beats() and self.others_running(study):
                time.sleep(min(self.s.heartbeat_interval, 5))  # another launch's trial: wait for it to end or go stale
            else:
                break
            left = self.left(study)
        return ran

    def where_run(self, number: int) -> list[str]:
        """A trial's job's own overrides: its number, its folder's, and resume=auto where it is a dead
        launch's trial asked again (in the folder of the first that ran its settings: it continues that
        run's checkpoints, and no half-run folder of it is left unfinished)."""
        origin = self.retried.get(number, number)
        return [f"hydra.sweeper.trial={number}", f"hydra.sweeper.origin={origin}",
                *(["resume=auto"] if origin != number else [])]

    def storage_beats(self) -> bool:
        """Whether the storage keeps heartbeats (an RDB): a journal file or memory does not."""
        return self.where is not None and self.where.kind != "journal"

    def say_done(self, study) -> None:
        """A launch that found nothing to run: the study's state and its best trial, and no sweep
        folder (a re-run of a finished study's command is not a failed sweep)."""
        import optuna

        done = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        best = (f"; best trial {study.best_trial.number}: {self.monitor()} = {study.best_value:.6g} with "
                f"{study.best_params}") if done else ""
        log.info("Optuna study %r already has its %d trial(s) (hydra.sweeper.n_trials=%d): nothing to run%s",
                 self.s.study_name, self.s.n_trials - max(self.left(study), 0), self.s.n_trials, best)
        # what the sweeper decided, where the command line reads it (its results file; no module-level flag)
        out = Path(self.config.hydra.sweep.dir)
        out.mkdir(parents=True, exist_ok=True)
        write_whole(out / RESULTS, json.dumps({"study_name": self.s.study_name, "nothing_ran": True}) + "\n")

    @staticmethod
    def tell(study, trials, returns) -> None:
        import optuna

        from attnexp.results.summary import Status

        for trial, ret in zip(trials, returns):
            folder = OmegaConf.select(ret.hydra_cfg, "hydra.runtime.output_dir") if ret.hydra_cfg is not None else None
            if folder:  # optuna-dashboard shows it beside the trial: the way back to the run's folder
                trial.set_user_attr("run_dir", str(folder))
            state, value = outcome(ret)
            if state == Status.COMPLETED:
                study.tell(trial, value, skip_if_finished=True)
            else:
                study.tell(trial, state=optuna.trial.TrialState.PRUNED if state == Status.PRUNED else
                           optuna.trial.TrialState.FAIL, skip_if_finished=True)

    def write_results(self, study) -> None:
        import optuna

        out = Path(self.config.hydra.sweep.dir)
        out.mkdir(parents=True, exist_ok=True)
        done = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        result = {"study_name": self.s.study_name, "storage": self.where.shown if self.where else None,
                  "direction": self.direction(),
                  "trials": len(study.trials), "complete": len(done),
                  "pruned": len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.PRUNED,))),
                  "best": {"number": study.best_trial.number, "value": study.best_value,
                           "params": study.best_params} if done else None}
        result["dashboard"] = dashboard_command(self.where)
        write_whole(out / RESULTS, json.dumps(result, indent=2) + "\n")
        if done:
            log.info("best trial %d: %s = %s with %s", study.best_trial.number,
                     OmegaConf.select(self.config, "checkpoint.monitor"), study.best_value, study.best_params)
        if result["dashboard"]:
            log.info("the study in a browser: %s", result["dashboard"])


RESULTS = layout.STUDY_RESULTS  # the sweep folder's record of the study: written by the sweeper, read by the command line


def require_optuna():
    try:
        import optuna
    except ImportError:
        raise SweepError("hparams_search=optuna needs Optuna: pip install 'attnexp[sweep]' (from a checkout: "
                         "pip install -e '.[sweep]')") from None
    # heartbeats, fail_stale_trials and RetryFailedTrialCallback are marked experimental; they are the
    # mechanism Optuna itself uses to tell a dead worker's trials from live ones
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    # the sweeper asks and tells (one trial a Hydra job) and records the heartbeats itself (Heartbeat)
    warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")
    return optuna


def precheck(hydra_cfg) -> str | None:
    """What stops an Optuna sweep before it starts, in one line (the command line says it before
    Hydra runs): Optuna missing, a study file that is not a whole SQLite database."""
    if "attnexp_optuna_sweeper" not in str(OmegaConf.select(hydra_cfg, "sweeper._target_") or ""):
        return None
    try:
        require_optuna()
        check_study_name(OmegaConf.select(hydra_cfg, "sweeper.study_name"))
        check(StudyStorage.parse(OmegaConf.select(hydra_cfg, "sweeper.storage")))
    except SweepError as e:
        return str(e)
    return None


def outcome(ret):
    """The trial's state (Status.COMPLETED, PRUNED or FAILED) and value, from the job's summary.json
    (the job's own record, which also says when a run was pruned or diverged)."""
    from attnexp.results.summary import Status, objective
    from attnexp.results.summary import read as read_summary

    try:
        out = Path(ret.hydra_cfg.hydra.runtime.output_dir)
        s = read_summary(out / layout.SUMMARY)  # the one reading rule: a job's folder is a stranger's file too
    except (AttributeError, OSError, ValueError):  # ValueError: SummaryError
        return Status.FAILED, None
    value = objective(s, OmegaConf.select(ret.cfg, "checkpoint.monitor") if ret.cfg is not None else None)
    if s.get("status") == Status.PRUNED:
        return Status.PRUNED, None
    if s.get("status") != Status.COMPLETED or value is None:
        return Status.FAILED, None
    return Status.COMPLETED, float(value)
