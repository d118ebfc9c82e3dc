"""RunRecorder: what a running Trainer adds to summary.json (metrics, steps, time, tokens, device),
written when training starts (status `running`), after every validation and epoch, and at the end,
atomically, so a run killed outright still shows in `attnexp compare` with its last epoch. Its
state (history, token count, fit time, random generators) travels in every checkpoint, so a
resumed run reports the whole run. The layout and the static part are attnexp.results.summary's."""

from __future__ import annotations

import math
import platform
import random
import resource
import time
from pathlib import Path

import lightning as L
import numpy as np
import torch
from lightning.pytorch.utilities import rank_zero_only, rank_zero_warn

from attnexp.compat.lightning import steps_logged
from attnexp.config import layout
from attnexp.model.flops import peak_tflops, train_flops_per_position
from attnexp.results import summary
from attnexp.results.summary import Status
from attnexp.training.stops import (
    Diverged,
    Interrupted,
    StopSignals,
    disk_full,
    disk_full_message,
    lightning_refused,
    status_for,
    unwritable,
)


def device_name(trainer: L.Trainer | None) -> str:
    if trainer is not None and trainer.strategy.root_device.type == "cuda":
        return torch.cuda.get_device_name(trainer.strategy.root_device)
    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def peak_memory_mb(trainer: L.Trainer | None) -> dict:
    out = {"cpu_max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
    if trainer is not None and trainer.strategy.root_device.type == "cuda":
        out["cuda_max_allocated_mb"] = round(torch.cuda.max_memory_allocated(trainer.strategy.root_device) / 2**20, 1)
    return out


def _sync(trainer) -> None:
    if trainer.strategy.root_device.type == "cuda":
        torch.cuda.synchronize(trainer.strategy.root_device)


def _floats(metrics: dict) -> dict:
    return {k: round(float(v), 6) for k, v in sorted(metrics.items())}


def rng_state() -> dict:
    """Every generator a training step draws from (dropout, masking), as plain data a
    weights_only load accepts."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    return {"torch": torch.get_rng_state(), "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "python": [version, list(internal), gauss], "numpy": [kind, keys.tolist(), pos, has_gauss, cached]}


def set_rng_state(s: dict) -> None:
    torch.set_rng_state(s["torch"])
    if s["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(s["cuda"])
    random.setstate((s["python"][0], tuple(s["python"][1]), s["python"][2]))
    kind, keys, pos, has_gauss, cached = s["numpy"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))


class RunRecorder(L.Callback):
    """Also measures each epoch's training throughput: `perf/tokens_per_s` (real tokens) and
    `perf/mfu` (analytic FLOPs, attnexp.perf, over the device's dense peak), logged and summarised."""

    def __init__(self, out_dir: Path, static: dict, stops: StopSignals, resumed_from: str | None = None,
                 started: float | None = None):
        self.out_dir, self.static, self.stops, self.started = Path(out_dir), static, stops, started
        self.t_start = time.perf_counter()
        self.t_fit0 = self.t_fit1 = None
        self.fit_s_before = 0.0  # fit time of the earlier parts of a resumed run
        self.tokens_before, self.tokens = 0, 0  # real training tokens (the collator counts them on the host)
        self.test_metrics: dict = {}
        self.final_val: dict = {}
        self.history: list[dict] = []  # validation metrics after every epoch
        self.extra: dict = {}  # more sections, e.g. attention_maps
        self.resumed_from = [resumed_from] if resumed_from else []
        self._rng: dict | None = None  # restored at the first training step of a resumed run
        self.status, self.error = Status.RUNNING, None
        self._epoch: dict | None = None  # this epoch's clock, FLOPs and tokens

    # -- what travels in checkpoints --------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"history": self.history, "final_val": self.final_val, "tokens": self.token_count(),
                "fit_s": self.fit_seconds(), "rng": rng_state(), "resumed_from": self.resumed_from}

    def setup(self, trainer, pl_module, stage):
        self._stage = stage  # runs before a checkpoint is restored

    def load_state_dict(self, state: dict) -> None:
        if getattr(self, "_stage", "fit") != "fit":  # trainer.test(ckpt_path=best) restores callbacks too
            return
        self.history, self.final_val = state["history"], state["final_val"]
        self.tokens_before, self.fit_s_before = state["tokens"], state["fit_s"]
        self.resumed_from = state["resumed_from"] + self.resumed_from
        self._rng = state["rng"]

    def token_count(self) -> int:
        """Tokens trained on: under DDP every rank's, summed at each epoch's end (since then, this
        rank's times the ranks: the shards' lengths differ by a few tokens)."""
        if self.world == 1:
            return self.tokens_before + self.tokens
        return self.tokens_before + self.tokens_counted + (self.tokens - self.tokens_at_count) * self.world

    world = 1  # processes training on shards of the data, each counting its own tokens
    tokens_counted = tokens_at_count = 0  # every rank's tokens summed at the last epoch end; this rank's then

    def fit_seconds(self) -> float:
        if self.t_fit0 is None:
            return self.fit_s_before
        return self.fit_s_before + (self.t_fit1 or time.perf_counter()) - self.t_fit0

    # -- hooks ------------------------------------------------------------------------------------
    def on_train_start(self, trainer, pl_module):
        self.world = trainer.world_size
        if self._rng is not None:  # after the sanity check, right where the interrupted run stopped
            set_rng_state(self._rng)
            self._rng = None
        self.t_fit0 = time.perf_counter()
        if "startup_s" not in self.extra:  # from `python -m attnexp` to training's start (once, not in the step)
            self.extra["startup_s"] = round(time.time() - self.started, 2) if self.started else None
        self.write(trainer, Status.RUNNING)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        n = batch["n_tokens"]  # a Python int from the collator: host arithmetic, no device op
        self.tokens += n
        if self._epoch is not None:
            e = self._epoch
            T = batch["input_ids"].shape[1]
            if T not in e["flops_per_position"]:
                e["flops_per_position"][T] = train_flops_per_position(e["matmul"], e["attention"], T, *e["sizes"])
            e["flops"] += batch["input_ids"].shape[0] * T * e["flops_per_position"][T]
            e["tokens"] += n

    def on_train_epoch_start(self, trainer, pl_module):
        m, a = pl_module.mcfg, pl_module.acfg
        _sync(trainer)
        self._epoch = {"t0": time.perf_counter(), "flops": 0.0, "tokens": 0, "flops_per_position": {}, "attention": a,
                       "matmul": pl_module.model.matmul_params(), "sizes": (m.d_model, m.n_heads, m.n_layers)}

    def on_validation_start(self, trainer, pl_module):
        if not trainer.sanity_checking:
            self._end_epoch_clock(trainer)

    def _end_epoch_clock(self, trainer) -> None:
        """Throughput of the epoch's training steps (validation excluded), one device sync an epoch."""
        e, self._epoch = self._epoch, None
        if e is None or not e["tokens"]:
            return
        _sync(trainer)
        seconds = time.perf_counter() - e["t0"]
        tokens, flops = e["tokens"], e["flops"]
        if trainer.world_size > 1:  # what every rank trained on (one all-reduce an epoch), not rank 0's times the ranks

            seen = trainer.strategy.reduce(torch.tensor([tokens, self.tokens, flops], dtype=torch.float64,
                                                        device=trainer.strategy.root_device), reduce_op="sum").tolist()
            tokens, flops = int(seen[0]), seen[2]
            self.tokens_counted, self.tokens_at_count = int(seen[1]), self.tokens
        perf = {"tokens_per_s": round(tokens / seconds, 1), "tflops": round(flops / seconds / 1e12, 4)}
        peak = peak_tflops(device_name(trainer), str(trainer.precision))
        if peak:
            perf.update(mfu=round(perf["tflops"] / (peak[0] * trainer.world_size), 4), peak=peak[1], peak_tflops=peak[0])
        else:
            perf["mfu"] = None  # no known peak for this device (a CPU, an unknown GPU)
        self.extra["perf"] = perf
        values = {f"perf/{k}": v for k, v in perf.items() if k in ("tokens_per_s", "tflops", "mfu") and v is not None}
        for lg in trainer.loggers:
            lg.log_metrics(values, step=steps_logged(trainer))

    def on_validation_end(self, trainer, pl_module):
        # not on_validation_epoch_end: callbacks run before the module's hook, which logs the epoch's metrics
        if trainer.sanity_checking:
            return
        self.final_val = {k: v for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
        self.history.append({"epoch": trainer.current_epoch, "step": trainer.global_step, **_floats(self.final_val)})
        ckpt = trainer.checkpoint_callback
        value = self.final_val.get(ckpt.monitor) if ckpt is not None else None
        if value is not None and not math.isfinite(float(value)):  # before ModelCheckpoint (it runs last) saves it
            raise Diverged(f"{ckpt.monitor} is {float(value)} after epoch {trainer.current_epoch}; stopped before "
                           f"a checkpoint of it was saved")

    def on_train_epoch_end(self, trainer, pl_module):
        self._end_epoch_clock(trainer)  # an epoch without validation
        self.write(trainer, Status.RUNNING)

    def on_train_end(self, trainer, pl_module):
        self.t_fit1 = time.perf_counter()

    def on_exception(self, trainer, pl_module, exception):
        """Keep what was trained, then the summary saying why the run stopped."""
        status = status_for(exception)
        path = None
        if status == Status.INTERRUPTED:
            name = self.stops.received or ("SIGINT" if isinstance(exception, KeyboardInterrupt) else "SIGTERM")
            self.extra["signal"] = name
            error = f"stopped by {name} at step {trainer.global_step}"
            # a first signal stops between two steps: a consistent state worth saving; a second one
            # (Interrupted) may land anywhere, so the last checkpoint written stays the one to resume
            if not isinstance(exception, Interrupted):
                path = self._save(trainer, layout.INTERRUPTED)
        elif status in (Status.DIVERGED, Status.PRUNED):
            error = str(exception)
        elif status == Status.CONFIG_ERROR:
            error = lightning_refused(exception) or str(exception)
        elif disk_full(exception):  # one more checkpoint would not fit either
            error = disk_full_message(self.out_dir, self.static.get("model", {}).get("n_params"))
        elif said := unwritable(exception):  # a folder of the run refused a write: the others may not
            error, path = said, self._save(trainer, layout.ON_EXCEPTION)
        else:
            error = f"{type(exception).__name__}: {exception}"
            path = self._save(trainer, layout.ON_EXCEPTION)
        if path is None and status not in (Status.DIVERGED, Status.PRUNED):
            from attnexp.model.checkpoints import newest

            path = newest(self.out_dir)
        self.extra["resume_checkpoint"] = str(path) if path else None
        self.write(trainer, status, error=error)

    def _save(self, trainer, name: str) -> Path | None:
        if self.t_fit0 is None:  # nothing trained yet (a failed start or resume): keep what is there
            return None
        path = self.out_dir / layout.CHECKPOINTS / name
        try:
            # A save, and a whole one (optimizer, schedule, loops, callbacks' state) so that resume=
            # continues from it: the second argument is Lightning's save-side `weights_only` (what to
            # write), said as ModelCheckpoint says it; left unset, Lightning logs "`weights_only` was
            # not set, defaulting to False", which reads as an unsafe load. Every checkpoint attnexp
            # reads goes through checkpoints.load (torch.load weights_only=True) or fit/test's
            # ckpt_path with weights_only=True.
            trainer.save_checkpoint(path, False)
            return path
        except Diverged:
            return None
        except Exception as e:  # the exception may have left no state worth saving
            rank_zero_warn(f"could not save {name}: {e}")
            return None

    @rank_zero_only
    def write(self, trainer: L.Trainer | None, status: Status, error: str | None = None) -> dict:
        self.status, self.error = status, error
        train_s = self.fit_seconds()
        tokens = self.token_count()
        ckpt = getattr(trainer, "checkpoint_callback", None) if trainer else None
        best = None
        if ckpt is not None and ckpt.best_model_score is not None and math.isfinite(float(ckpt.best_model_score)):
            best = {"monitor": ckpt.monitor, "value": round(float(ckpt.best_model_score), 6),
                    "checkpoint": ckpt.best_model_path}
        last = self.out_dir / layout.CHECKPOINTS / layout.LAST
        record = {
            **summary.header(status, error, self.out_dir),
            **self.static,
            "metrics": {"final": _floats(self.final_val), "best": best, "test": _floats(self.test_metrics),
                        "history": self.history},
            "steps": trainer.global_step if trainer else 0,
            "epochs": trainer.current_epoch if trainer else 0,
            # from the command's start where it is known (data preparation included), else from this recorder's
            "wall_time_s": round(time.time() - self.started if self.started else time.perf_counter() - self.t_start, 2),
            "train_time_s": round(train_s, 2),
            "train_tokens": tokens,
            "tokens_per_s": round(tokens / train_s, 1) if train_s > 0 else None,
            "device": device_name(trainer),
            "precision": str(trainer.precision) if trainer else None,
            "peak_memory": peak_memory_mb(trainer),
            "resumed_from": self.resumed_from,
            "skipped_batches": getattr(trainer.lightning_module, "skipped", 0) if trainer else 0,
            "checkpoints": {"last": str(last) if last.exists() else None, "best": best["checkpoint"] if best else None},
            **self.extra,
            "versions": summary.versions(),
        }
        self.out_dir.mkdir(parents=True, exist_ok=True)
        try:
            summary.write(self.out_dir / summary.NAME, record, reserve=summary.RESERVE if status == Status.RUNNING else 0)
        except OSError as e:
            if status == Status.RUNNING or not disk_full(e):  # a full disk mid-run: the exception that follows says it
                raise
            rank_zero_warn(f"summary.json could not be written: {e}")  # the run's end said on the console instead
        return record
