"""`hydra/sweeper=attnexp_optuna`: trials asked of an Optuna study, launched by the configured
Hydra launcher in batches of `n_jobs`, told the value each job's summary.json reports.

Search spaces use Hydra's sweep syntax, in `hydra.sweeper.params` or on the command line:
`optim.lr='tag(log, interval(1e-4, 1e-2))'`, `model.d_model='choice(64, 128)'`,
`model.n_layers='range(1, 5)'`."""

from __future__ import annotations

import json
import logging
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, Override, RangeSweep
from hydra.core.plugins import Plugins
from hydra.plugins.sweeper import Sweeper
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)


@dataclass
class AttnexpOptunaSweeperConf:
    _target_: str = "hydra_plugins.attnexp_optuna_sweeper.sweeper.OptunaSweeper"
    study_name: str = "attnexp"
    storage: str | None = "sqlite:///optuna.db"  # a study resumes from it; optuna-dashboard reads it
    direction: str = "auto"  # auto: maximize for accuracies and F1, minimize for losses (checkpoint.monitor)
    n_trials: int = 20  # in all, counting the trials the storage already holds
    n_jobs: int = 1  # trials launched at once (a parallel launcher runs them side by side)
    sampler: str = "tpe"  # tpe | random
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
    # for, which the job opens from `storage` to report per-epoch values and be pruned.
    trial: int | None = None


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
        self.job_idx = 0

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
        from attnexp.config import higher_is_better

        return "maximize" if higher_is_better(self.monitor()) else "minimize"

    def study(self):
        optuna = require_optuna()
        url = self.s.storage
        if url and url.startswith("sqlite:///"):  # SQLite makes the file, not its folder
            path = Path(url[len("sqlite:///"):])
            path.parent.mkdir(parents=True, exist_ok=True)
            check_sqlite(path)
        sampler = (optuna.samplers.RandomSampler(seed=self.s.seed) if self.s.sampler == "random"
                   else optuna.samplers.TPESampler(seed=self.s.seed))
        pruner = (optuna.pruners.NopPruner() if self.s.pruner == "none" else
                  optuna.pruners.MedianPruner(n_startup_trials=self.s.n_startup_trials, n_warmup_steps=self.s.n_warmup_steps))
        storage = url
        if url:
            import inspect

            # the callback's keyword was renamed in Optuna 4.9 (the old one warns, and goes in 6.0)
            key = ("heartbeat_stale_trial_callback" if "heartbeat_stale_trial_callback" in
                   inspect.signature(optuna.storages.RDBStorage).parameters else "failed_trial_callback")
            storage = optuna.storages.RDBStorage(
                url, heartbeat_interval=self.s.heartbeat_interval, grace_period=self.s.grace_period,
                **{key: getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback",
                                optuna.storages.RetryFailedTrialCallback)(max_retry=3)})
        study = optuna.create_study(study_name=self.s.study_name, storage=storage, sampler=sampler, pruner=pruner,
                                    direction=self.direction(), load_if_exists=True)
        if not study.metric_names:  # optuna-dashboard and study.trials_dataframe() then say "val/loss", not "Objective 0"
            study.set_metric_names([self.monitor()])
        return study

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
        taken = len(study.get_trials(deepcopy=False, states=(S.COMPLETE, S.PRUNED, S.FAIL, S.RUNNING)))
        return max(self.s.n_trials - taken, len(study.get_trials(deepcopy=False, states=(S.WAITING,))))

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
        log.info("Optuna study %r (%s, %s): %d trial(s) to run, %d already in %s", self.s.study_name,
                 self.direction(), type(study.sampler).__name__, max(left, 0), self.s.n_trials - left, self.s.storage)
        while left > 0:
            trials = [study.ask() for _ in range(min(self.s.n_jobs, left))]
            batch = [[*fixed, *(f"{k}={suggest(trial)}" for k, suggest in space.items()),
                      f"hydra.sweeper.trial={trial.number}"] for trial in trials]
            with Heartbeat(study, trials, self.s.heartbeat_interval if self.s.storage else 0):
                returns = self.launcher.launch(batch, initial_job_idx=self.job_idx)
            self.tell(study, trials, returns)
            self.job_idx += len(trials)
            left = self.left(study)
        self.write_results(study)

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
        result = {"study_name": self.s.study_name, "storage": self.s.storage, "direction": self.direction(),
                  "trials": len(study.trials), "complete": len(done),
                  "pruned": len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.PRUNED,))),
                  "best": {"number": study.best_trial.number, "value": study.best_value,
                           "params": study.best_params} if done else None}
        (out / "optuna_results.json").write_text(json.dumps(result, indent=2) + "\n")
        if done:
            log.info("best trial %d: %s = %s with %s", study.best_trial.number,
                     OmegaConf.select(self.config, "checkpoint.monitor"), study.best_value, study.best_params)


class Heartbeat:
    """Records each trial's heartbeat in the storage every `interval` seconds while its jobs run
    (Optuna records it only inside study.optimize; the sweeper asks and tells)."""

    def __init__(self, study, trials, interval: int):
        self.storage, self.ids, self.interval = study._storage, [t._trial_id for t in trials], interval
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.beat, daemon=True, name="optuna-heartbeat")

    def beat(self) -> None:
        while True:
            for trial_id in self.ids:
                try:
                    self.storage.record_heartbeat(trial_id)
                except Exception as e:  # noqa: BLE001 - a busy SQLite file: the next beat comes soon
                    log.debug("heartbeat of trial %s not recorded: %s", trial_id, e)
            if self.stop.wait(self.interval):
                return

    def __enter__(self):
        if self.interval:
            self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join()
        return False


def require_optuna():
    try:
        import optuna
    except ImportError:
        raise SweepError("hparams_search=optuna needs Optuna: pip install -e '.[sweep]'") from None
    # heartbeats, fail_stale_trials and RetryFailedTrialCallback are marked experimental; they are the
    # mechanism Optuna itself uses to tell a dead worker's trials from live ones
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    # the sweeper asks and tells (one trial a Hydra job) and records the heartbeats itself (Heartbeat)
    warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")
    return optuna


# Every table Optuna's RDB storage makes (optuna/storages/_rdb/models.py) and alembic's own: a study
# file holding any other table is another tool's database, and Optuna would add its tables to it.
OPTUNA_TABLES = {"studies", "study_directions", "study_user_attributes", "study_system_attributes", "trials",
                 "trial_user_attributes", "trial_system_attributes", "trial_params", "trial_values",
                 "trial_intermediate_values", "trial_heartbeats", "version_info", "alembic_version"}


def check_sqlite(path: Path) -> None:
    """A study file that exists is a whole SQLite database holding only an Optuna study's tables,
    or one line saying what it is; it is opened read-only, so a refused file stays byte-identical."""
    if path.is_dir():
        raise SweepError(f"hydra.sweeper.storage: {path} is a folder; give a file for the study, e.g. "
                         f"hydra.sweeper.storage=sqlite:///{path}/study.db")
    if not path.exists():
        return
    with open(path, "rb") as f:
        head = f.read(16)
    problem = None if head == b"SQLite format 3\x00" else "not an SQLite database"
    if problem is None:
        import sqlite3

        try:
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
                ok = db.execute("PRAGMA quick_check").fetchone()[0]
                tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            problem = None if ok == "ok" else f"a damaged SQLite database ({ok[:60]})"
            foreign = sorted(t for t in tables - OPTUNA_TABLES if not t.startswith("sqlite_"))
            if problem is None and foreign:
                problem = (f"another tool's database (it holds tables {', '.join(foreign[:4])}"
                           f"{' ...' if len(foreign) > 4 else ''}, which no Optuna study has)")
        except sqlite3.DatabaseError as e:
            problem = f"a damaged SQLite database ({e})"
    if problem:
        raise SweepError(f"hydra.sweeper.storage: {path} is {problem}; give a new file name, or move it away to "
                         f"start the study afresh")


def precheck(hydra_cfg) -> str | None:
    """What stops an Optuna sweep before it starts, in one line (the command line says it before
    Hydra runs): Optuna missing, a study file that is not a whole SQLite database."""
    if "attnexp_optuna_sweeper" not in str(OmegaConf.select(hydra_cfg, "sweeper._target_") or ""):
        return None
    try:
        require_optuna()
        url = str(OmegaConf.select(hydra_cfg, "sweeper.storage") or "")
        if url.startswith("sqlite:///"):
            check_sqlite(Path(url[len("sqlite:///"):]))
    except SweepError as e:
        return str(e)
    return None


class SweepError(ValueError):
    """A sweep that cannot start, said in one line by the command line."""


def outcome(ret):
    """The trial's state (Status.COMPLETED, PRUNED or FAILED) and value, from the job's summary.json
    (the job's own record, which also says when a run was pruned or diverged)."""
    from attnexp.results.summary import Status, objective

    try:
        out = Path(ret.hydra_cfg.hydra.runtime.output_dir)
        s = json.loads((out / "summary.json").read_text())
    except (AttributeError, OSError, ValueError):
        return Status.FAILED, None
    value = objective(s, OmegaConf.select(ret.cfg, "checkpoint.monitor") if ret.cfg is not None else None)
    if s.get("status") == Status.PRUNED:
        return Status.PRUNED, None
    if s.get("status") != Status.COMPLETED or value is None:
        return Status.FAILED, None
    return Status.COMPLETED, float(value)
