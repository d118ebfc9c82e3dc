"""What the sweeper keeps about its trials apart from asking and telling: each launch's sampler seed,
which trials fill the study's n_trials, and the heartbeats of the trials a launch is running (Optuna
records them only inside study.optimize; the sweeper asks and tells)."""

from __future__ import annotations

import logging
import threading
import time

from attnexp.compat.optuna import study_storage, trial_ids

log = logging.getLogger(__name__)


class Heartbeat:
    """Records each trial's heartbeat in the storage every `interval` seconds while its jobs run
    (Optuna records it only inside study.optimize; the sweeper asks and tells)."""

    def __init__(self, study, trials, interval: int):
        self.storage, self.ids, self.interval = study_storage(study), trial_ids(trials), interval
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


def counted(study, trials: list | None = None) -> list:
    """The trials that fill the study's n_trials: finished, failed or running, but not a surplus ask
    (OptunaSweeper.ask) and not a dead launch's trial that was asked again (its retry counts instead)."""
    import optuna

    S = optuna.trial.TrialState
    trials = study.get_trials(deepcopy=False) if trials is None else trials
    retried = {t.system_attrs.get("failed_trial") for t in trials} - {None}
    return [t for t in trials if t.state in (S.COMPLETE, S.PRUNED, S.FAIL, S.RUNNING)
            and not t.user_attrs.get("surplus") and not (t.state == S.FAIL and t.number in retried)]


def launch_seed(base: int | None, launch: str) -> int | None:
    """This launch's sampler seed: None stays None (Optuna draws one); else one derived from the base
    seed, the launch (host:pid) and the time, so launches on one study never ask alike."""
    if base is None:
        return None
    import hashlib

    digest = hashlib.sha256(f"{base}:{launch}:{time.time_ns()}".encode()).digest()
    return int.from_bytes(digest[:4], "little")
