"""`attnexp train`: build data, model and trainer from a validated `Run`, fit, test, and write
summary.json. Third-party objects (Trainer, loggers, extra callbacks) are built with Hydra's
`instantiate`; everything of ours is built from typed configs.

Whatever happens, the run leaves a summary.json saying so: `running` from the first step,
`completed`, `interrupted` (a stop signal: a checkpoint of that step, resumable), `diverged`
(a loss that is no longer a number; no checkpoint of it), `failed` (an exception) or
`config_error` (bad settings or bad input data, found before the first step)."""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Sequence
from pathlib import Path

import lightning as L
import torch
from hydra.utils import instantiate
from lightning.fabric.plugins import TorchCheckpointIO
from lightning.fabric.utilities.exceptions import MisconfigurationException
from lightning.pytorch.callbacks import EarlyStopping, LearningRateMonitor, ModelCheckpoint
from lightning.pytorch.loggers import TensorBoardLogger, WandbLogger
from omegaconf import OmegaConf

from attnexp import checkpoints
from attnexp.config import ConfigError, check
from attnexp.console import EpochLines, bar_safe_logging, interactive
from attnexp.data import build_datamodule
from attnexp.guards import OptunaPruning, StopGuard
from attnexp.lit import AttnexpModule
from attnexp.maps.callback import AttentionMaps
from attnexp.recorder import RunRecorder
from attnexp.run import Run, training_on_cpu
from attnexp.stops import Interrupted, StopSignals
from attnexp.summary import error_record, static_record, write_json
from attnexp.sweeps import ACTIVE_TRIALS, split_override, threads, wandb_sweep_fields

log = logging.getLogger(__name__)


def resolve_precision(run: Run) -> str | int:
    if run.trainer.precision not in (None, "auto"):
        return run.trainer.precision
    gpu = not training_on_cpu(run.trainer) and torch.cuda.is_available()
    return ("bf16-mixed" if torch.cuda.is_bf16_supported() else "16-mixed") if gpu else "32-true"


class _DropAdverts(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "litlogger" not in record.getMessage()


def quiet_lightning() -> None:
    # num_workers=0 is a deliberate default for in-memory token lists; the hint is noise here.
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")
    warnings.filterwarnings("ignore", message=".*isinstance.treespec, LeafSpec.*")
    # Our batch sampler resumes mid-epoch from Lightning's own progress counters (data/base.py),
    # which Lightning cannot see: its warning that the loader is not resumable does not apply.
    warnings.filterwarnings("ignore", message=".*dataloader is not resumable.*")
    warnings.filterwarnings("ignore", message=".*`training_step` returned `None`.*")  # optim.nonfinite=skip, on purpose
    # DDP: our epoch values are reduced already (torchmetrics' compute, the loss sums in lit.py)
    warnings.filterwarnings("ignore", message=".*when logging on epoch level in distributed setting.*")
    warnings.filterwarnings("ignore", message=".*Checkpoint directory .* exists and is not empty.*")  # a resumed run's own
    logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(_DropAdverts())
    bar_safe_logging()
    # Under Hydra the root logger already prints (and writes the job's .log): Lightning's own
    # console handlers would print every line twice.
    if logging.getLogger().handlers:
        for name in ("lightning", "lightning.pytorch", "lightning.fabric"):
            lg = logging.getLogger(name)
            for h in list(lg.handlers):
                lg.removeHandler(h)
            lg.propagate = True


class AtomicCheckpointIO(TorchCheckpointIO):
    """torch.save into a temporary file beside the target, flushed to disk, then renamed over it:
    a kill during a save leaves the previous checkpoint whole. (Lightning's own save goes through
    an fsspec transaction whose temporary file lives in the system temp dir; across filesystems
    its final move is a copy, which a kill can leave half-written.)"""

    def save_checkpoint(self, checkpoint, path, storage_options=None):
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            with open(tmp, "wb") as f:
                torch.save(checkpoint, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)


def active_trial():
    """The Optuna trial this job runs for (attnexp's sweeper, jobs in this process), if any."""
    from hydra.core.hydra_config import HydraConfig

    if not ACTIVE_TRIALS or not HydraConfig.initialized():
        return None
    return ACTIVE_TRIALS.get(HydraConfig.get().job.num)


def thread_count(run: Run) -> int | None:
    """`threads=N`; else the launcher's cpus_per_task; else, for jobs run side by side on this
    machine (the CLI says how many), their share of the cores; else torch's default."""
    if run.threads:
        return run.threads
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        cpus = OmegaConf.select(HydraConfig.get(), "launcher.cpus_per_task")
        if cpus:
            return int(cpus)
    parallel = os.environ.get("ATTNEXP_PARALLEL")
    return threads(int(parallel)) if parallel else None


def resume_path(run: Run) -> Path | None:
    """resume=auto: the newest checkpoint of this run's own folder (none yet: a fresh start, which
    makes `resume=auto` safe on every launch of a preemptible job); resume=PATH: that file."""
    if run.resume == "auto":
        return checkpoints.newest(run.out_dir)
    return Path(run.resume) if run.resume else None


def train(run: Run, callbacks: Sequence[L.Callback] = ()) -> dict:
    """Train one run into `run.out_dir`; returns the summary (also written to summary.json).
    `callbacks`: Lightning callbacks of the caller's, added to those the config builds."""
    out = run.out_dir
    out.mkdir(parents=True, exist_ok=True)
    threads_before = torch.get_num_threads()  # `threads=` is this run's: the next job of a sweep starts from the default
    with StopSignals() as stops:
        try:
            summary = _train(run, stops, callbacks)
            if summary and summary["status"] == "interrupted":
                stops.chain()  # e.g. submitit's requeue, now that the checkpoint is written
            return summary
        except (ConfigError, Interrupted, Exception) as e:
            if (out / "summary.json").is_file() and _status(out) != "running":
                raise  # the recorder has written what happened
            status = "config_error" if isinstance(e, ConfigError) else "interrupted" if isinstance(e, Interrupted) else "failed"
            msg = str(e) if isinstance(e, (ConfigError, Interrupted)) else f"{type(e).__name__}: {e}"
            if isinstance(e, Interrupted):
                msg = f"stopped by {e.signame} before training started"
            write_json(out / "summary.json", {**error_record(out, status, msg, run.choices, run.overrides, run.sweep_dir),
                                              **({"signal": e.signame} if isinstance(e, Interrupted) else {})})
            raise
        finally:
            torch.set_num_threads(threads_before)


def _status(out: Path) -> str | None:
    import json

    try:
        return json.loads((out / "summary.json").read_text()).get("status")
    except (OSError, ValueError):
        return None


def _train(run: Run, stops: StopSignals, callbacks: Sequence[L.Callback]) -> dict:
    out = run.out_dir
    (out / "config_resolved.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(run.config)))
    quiet_lightning()
    L.seed_everything(run.seed, workers=True, verbose=False)
    torch.set_float32_matmul_precision("high")
    n_threads = thread_count(run)
    if n_threads:
        torch.set_num_threads(n_threads)

    resume = resume_path(run)
    ckpt = checkpoints.load(resume, "resume") if resume else None
    dm = build_datamodule(run.data, run.task, causal=run.attention.causal, run_dir=str(out), seed=run.seed)
    dm.setup("fit")
    if run.task.name == "classify":
        check(dm.num_classes, f"data={run.data.name} has no labels for task=classify")
    check(len(dm.splits["train"]) > 0, f"data={run.data.name} has no training examples; nothing to train on")
    module = AttnexpModule.from_configs(run.model, run.attention, run.task, run.optim, dm.vocab_size, dm.num_classes)
    if run.model.init and ckpt is None:  # a resumed run takes every weight from its checkpoint instead
        from attnexp import hf

        hf.load_into(module.model, hf.source_of(run.model.init))
        log.info("weights from %s (the task head starts fresh)", run.model.init)
    if ckpt is not None:
        checkpoints.check_shapes(ckpt, module.state_dict(), "resume", resume)
        del ckpt

    data = {"name": run.data.name, "vocab_size": dm.vocab_size, "num_classes": dm.num_classes,
            **{f"n_{k}": len(v) for k, v in dm.splits.items()}}
    recorder = RunRecorder(out, static_record(run, module.model.num_params(), data), stops,
                           resumed_from=str(resume) if resume else None)
    ckpt_dir = out / "checkpoints"
    checkpoint = ModelCheckpoint(dirpath=ckpt_dir, filename="best-epoch{epoch:02d}", monitor=run.checkpoint.monitor,
                                 mode=run.checkpoint.mode, save_top_k=1, save_last=True, auto_insert_metric_name=False)
    on_cpu = training_on_cpu(run.trainer) or not torch.cuda.is_available()
    ours = [checkpoint, recorder, StopGuard(stops, ckpt_dir if run.optim.nonfinite == "stop" else None,
                                            every=1 if on_cpu else (run.trainer.log_every_n_steps or 50))]
    if run.checkpoint.every_n_steps:  # the latest only; written atomically (Lightning saves to a temp file, then renames)
        ours.append(ModelCheckpoint(dirpath=ckpt_dir, filename="step-{step:07d}", every_n_train_steps=run.checkpoint.every_n_steps,
                                    save_top_k=1, auto_insert_metric_name=False))
    if run.checkpoint.patience:
        ours.append(EarlyStopping(monitor=run.checkpoint.monitor, mode=run.checkpoint.mode, patience=run.checkpoint.patience))
    bar = run.trainer.enable_progress_bar is not False and interactive()  # a bar only where someone watches it
    if not bar:
        ours.append(EpochLines())
    trial = active_trial()
    if trial is not None:
        ours.append(OptunaPruning(trial, run.checkpoint.monitor))
    maps = AttentionMaps(run.maps, out) if run.maps.enabled else None
    callbacks = [*ours, *([maps] if maps else []), *callbacks, *(instantiate(c) for c in run.callbacks.values())]
    loggers = [instantiate(wandb_sweep_fields(lg, run.sweep_dir, run.overrides) if "Wandb" in lg.get("_target_", "") else lg)
               for lg in run.loggers.values()]
    if loggers:
        callbacks.append(LearningRateMonitor(logging_interval="step"))
    for lg in loggers:  # the whole config: TensorBoard's hparams.yaml, wandb's run config
        lg.log_hyperparams(run.config)

    try:
        trainer = instantiate({**run.trainer.kwargs(), "precision": resolve_precision(run), "enable_progress_bar": bar},
                              callbacks=callbacks,
                              logger=loggers or False, default_root_dir=str(out), plugins=[AtomicCheckpointIO()],
                              _convert_="partial")
    except Exception as e:  # Hydra wraps Lightning's MisconfigurationException: keep its whole sentence
        cause = e.__cause__ or e
        raise ConfigError(f"trainer: {' '.join(str(cause).split())}") from None
    stops.trainer = trainer
    try:
        trainer.fit(module, datamodule=dm, ckpt_path=str(resume) if resume else None, weights_only=True)
        record_early_stop(recorder, trainer)  # before trainer.test restores the callbacks from the best checkpoint
        if run.test and not trainer.fast_dev_run:
            results = trainer.test(module, datamodule=dm, ckpt_path=checkpoint.best_model_path or None, verbose=False,
                                   weights_only=True)
            recorder.test_metrics = results[0] if results else {}
        return _finished(recorder, trainer, maps, out, status="completed", run=run)
    except MisconfigurationException as e:  # Lightning found a setting it cannot run (e.g. a limit below one batch)
        raise ConfigError(f"trainer: {' '.join(str(e).split())}") from None
    except BaseException:
        if recorder.status in ("interrupted", "diverged", "pruned"):  # recorded by on_exception: an outcome, not a bug
            return _finished(recorder, trainer, maps, out)
        raise
    finally:
        stops.trainer = None
        close_loggers(loggers, recorder.status)


def close_loggers(loggers: list, status: str) -> None:
    """A wandb run ends with its job: the next job of a sweep (Hydra's basic launcher runs them in
    one process) gets a run of its own instead of writing into this one; a run that did not
    complete is marked failed."""
    for lg in loggers:
        if isinstance(lg, WandbLogger) and lg._experiment is not None:
            lg.experiment.finish(exit_code=0 if status == "completed" else 1)


def hparams_record(run: Run, summary: dict) -> tuple[dict, dict]:
    """TensorBoard's HPARAMS tab: the settings runs are compared by (the main ones and every
    override) and the final metrics, under hp/ so the curves of the same names stay untouched."""
    c = run.config
    params = {"attention": c["attention"], "model": c["model"], "task": summary["task"], "optim": c["optim"],
              "data": {k: c["data"].get(k) for k in ("name", "max_len", "batch_size", "kind", "remove")},
              "trainer": {"max_epochs": run.trainer.max_epochs}, "seed": run.seed}
    flat = {}

    def walk(d, prefix=""):
        for k, v in d.items():
            if isinstance(v, dict):
                walk(v, f"{prefix}{k}.")
            else:
                flat[f"{prefix}{k}"] = v if isinstance(v, (int, float, str, bool)) else str(v)

    walk(params)
    for o in run.overrides or []:
        flat.setdefault(*split_override(o))
    m = summary["metrics"]
    metrics = {f"hp/{k}": v for k, v in {**m["final"], **m["test"]}.items()}
    if m.get("best"):
        metrics["hp/best"] = m["best"]["value"]
    return flat, {k: v for k, v in metrics.items() if isinstance(v, (int, float))}


def record_early_stop(recorder: RunRecorder, trainer) -> None:
    es = next((c for c in trainer.callbacks if isinstance(c, EarlyStopping)), None)
    if es is not None and "early_stopping" not in recorder.extra:
        recorder.extra["early_stopping"] = {"monitor": es.monitor, "patience": es.patience,
                                            "stopped_epoch": es.stopped_epoch or None}


def _finished(recorder: RunRecorder, trainer, maps, out: Path, status: str | None = None, run: Run | None = None) -> dict:
    if maps:
        recorder.extra["attention_maps"] = {"dir": str(out / "maps"), "alignment": maps.last_alignment}
    record_early_stop(recorder, trainer)
    if status is None:  # stopped early: on_exception wrote the status; write it again with the map section
        import json

        prev = json.loads((out / "summary.json").read_text())
        return recorder.write(trainer, prev["status"], error=prev.get("error"))
    summary = recorder.write(trainer, status)
    if run is not None and summary:
        params, metrics = hparams_record(run, summary)
        for lg in trainer.loggers:
            if isinstance(lg, TensorBoardLogger):
                lg.log_hyperparams(params, metrics, step=trainer.global_step)
                # written after Lightning finalized the logger: flush now, or the record waits for
                # the writer's 2-minute timer (or is lost when the process ends first)
                lg.experiment.flush()
    return summary
