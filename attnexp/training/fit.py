"""`train(run)`: set up the data and the model from a validated `Run`, fit, test, and leave a
summary.json saying what happened, whatever happens: `running` from the first step, then
`completed`, `interrupted` (a stop signal: a checkpoint of that step, resumable), `diverged` (a loss
that is no longer a number; no checkpoint of it), `pruned`, `failed` (an exception) or
`config_error` (bad settings or bad input data, found before the first step)."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import asdict

import lightning as L
import torch
from hydra.utils import instantiate
from lightning.fabric.utilities.exceptions import MisconfigurationException
from lightning.pytorch.callbacks import EarlyStopping
from omegaconf import OmegaConf

from attnexp.config import ConfigError, Run, check, layout, split_override
from attnexp.config.files import FileRefused
from attnexp.config.paths import write_whole
from attnexp.data import build_datamodule
from attnexp.data.base import identity_mismatch
from attnexp.model import checkpoints
from attnexp.results import summary, test_reads
from attnexp.results.summary import Status
from attnexp.training import build, checkpointing, threads
from attnexp.training.loggers import dashboards, finish, links, log_final_hparams
from attnexp.training.module import AttnexpModule
from attnexp.training.recorder import RunRecorder
from attnexp.training.stops import Interrupted, QuietDiskFullThreads, StopSignals, lightning_refused, status_for

log = logging.getLogger(__name__)


def train(run: Run, callbacks: Sequence[L.Callback] = ()) -> dict | None:
    """Train one run into `run.out_dir`; returns the summary (also written to summary.json), or
    None on the other ranks of a distributed run. `callbacks`: Lightning callbacks of the caller's,
    added to those the config builds."""
    run.out_dir.mkdir(parents=True, exist_ok=True)
    checkpointing.remove_orphans(run.out_dir)
    threads_before = torch.get_num_threads()  # `threads=` is this run's: the next job of a sweep starts from the default
    with StopSignals() as stops, QuietDiskFullThreads():
        try:
            result = _train(run, stops, callbacks)
            if result and result["status"] == Status.INTERRUPTED:
                stops.chain()  # e.g. submitit's requeue, now that the checkpoint is written
            return result
        except BaseException as e:
            record_early_failure(run, e)
            raise
        finally:
            torch.set_num_threads(threads_before)


def record_early_failure(run: Run, e: BaseException) -> None:
    """A run that stopped before the recorder took over (a config or data error, a failed setup, a
    signal during data loading) still leaves a summary.json saying so; one the recorder wrote is
    its own record."""
    if summary.read_status(run.out_dir) not in (None, Status.RUNNING):
        return
    status = status_for(e)
    msg = str(e) if isinstance(e, ConfigError) else f"{type(e).__name__}: {e}"
    extra = {}
    if isinstance(e, Interrupted):
        msg, extra = f"stopped by {e.signame} before training started", {"signal": e.signame}
    try:
        summary.write(run.out_dir / summary.NAME, summary.error_record(run.out_dir, status, msg, run.job, **extra))
    except OSError:  # a full or read-only disk: the exception itself says what happened
        pass


def check_val_interval(run, dm) -> None:
    """Lightning refuses a validation every N batches with N past an epoch's batches (a traceback,
    after the run folder was made): said here in one line, with the epoch's size (e.g. a preset on
    data.limit= posts)."""
    every, t = run.trainer.extra.get("val_check_interval"), run.trainer
    if not isinstance(every, int) or isinstance(every, bool) or t.fast_dev_run or t.limit_val_batches == 0:
        return  # as Lightning: fast_dev_run validates once a run, no validation batches validate nothing
    n, limit = len(dm.train_dataloader()), t.limit_train_batches
    n = n if limit is None else min(n, limit) if isinstance(limit, int) else int(n * limit)
    check(every <= n, f"trainer.val_check_interval={every} is more batches than an epoch has ({n}); lower it, or "
                      f"validate once an epoch with trainer.val_check_interval=1.0")


def prepare(run: Run):
    """Seed, threads, the data set up, the module built (pretrained weights loaded, a resumed run's
    checkpoint checked against it): (datamodule, module, resume path)."""
    resolved = OmegaConf.to_yaml(OmegaConf.create(run.config))
    write_whole(run.out_dir / layout.CONFIG, resolved)
    build.quiet_lightning(run.extras.ignore_warnings)
    if run.extras.print_config and os.environ.get("LOCAL_RANK", "0") == "0":
        print(resolved, end="", flush=True)
    L.seed_everything(run.seed, workers=True, verbose=False)
    torch.set_float32_matmul_precision("high")
    cores = threads.CoreSample()  # threads=null: the free cores, read over the data set-up below, not in a wait of their own
    if given := threads.given_threads(run):
        torch.set_num_threads(given)
    resume = build.resume_path(run)
    ckpt = checkpoints.load(resume, "resume") if resume else None
    if ckpt is not None and run.resume == "auto":  # resume=PATH was checked with the config
        problem = checkpoints.mismatch(ckpt, asdict(run.model), asdict(run.attention), asdict(run.task), "resume", resume)
        check(problem is None, problem or "")
        checkpoints.check_resumable(ckpt, "resume", resume)
    dm = build_datamodule(run.data, run.task, causal=run.attention.causal, run_dir=str(run.out_dir), seed=run.seed)
    dm.setup("fit")
    if not given and (free := threads.free_threads(cores)):
        torch.set_num_threads(free)
    if run.task.name == "classify":
        check(dm.num_classes, f"data={run.data.name} has no labels for task=classify")
    check(len(dm.splits["train"]) > 0, f"data={run.data.name} has no training examples; nothing to train on")
    check_val_interval(run, dm)
    module = AttnexpModule.from_configs(run.model, run.attention, run.task, run.optim, dm.vocab_size, dm.num_classes)
    module.data_identity = dm.identity()
    if run.model.init and ckpt is None:  # a resumed run takes every weight from its checkpoint instead
        init_weights(run, module)
    if ckpt is not None:
        problem = identity_mismatch(ckpt.get("data_identity"), module.data_identity)
        check(problem is None, f"resume={str(resume)!r} was trained on other data: {problem}; resume with the data it "
                               f"was trained on, or start a new run from its weights with model.init={resume}")
        checkpoints.check_shapes(ckpt, module.state_dict(), "resume", resume)
    return dm, module, resume


def init_weights(run: Run, module: AttnexpModule) -> None:
    """model.init: a pretrained model's weights (hf:...; the task head starts fresh), or an attnexp
    checkpoint's (every weight; a new optimizer, schedule and run: fine-tuning on other data)."""
    if run.model.init.startswith("hf:"):
        from attnexp.model import pretrained

        pretrained.load_into(module.model, pretrained.source_of(run.model.init))
        log.info("weights from %s (the task head starts fresh)", run.model.init)
        return
    ckpt = checkpoints.load(run.model.init, "model.init")  # its settings were checked with the config
    own = module.model.state_dict()
    weights = checkpoints.model_weights(ckpt)
    checkpoints.check_shapes({"state_dict": weights}, own, "model.init", run.model.init)
    module.model.load_state_dict({k: weights[k] for k in own})
    log.info("weights from %s (a new run: optimizer and schedule start fresh)", run.model.init)


def _train(run: Run, stops: StopSignals, extra_callbacks: Sequence[L.Callback]) -> dict | None:
    dm, module, resume = prepare(run)
    data = {"name": run.data.name, "vocab_size": dm.vocab_size, "num_classes": dm.num_classes,
            **{f"n_{k}": len(v) for k, v in dm.splits.items()}, "identity": module.data_identity}
    recorder = RunRecorder(run.out_dir, summary.static_record(run, module.model.num_params(), data,
                                                          dashboards(run.loggers, run.out_dir)), stops,
                           resumed_from=str(resume) if resume else None, started=run.job.started)
    ours, best, maps = build.our_callbacks(run, recorder, stops)
    callbacks = [*ours, *extra_callbacks, *(instantiate(c) for c in run.callbacks.values())]
    loggers = build.loggers(run)
    recorder.static["dashboards"] = [*recorder.static.get("dashboards", []), *links(loggers)]  # known once they exist
    trainer = build.trainer(run, callbacks, loggers)
    stops.trainer = trainer
    try:
        trainer.fit(module, datamodule=dm, ckpt_path=str(resume) if resume else None, weights_only=True)
        record_early_stop(recorder, trainer)  # before trainer.test restores the callbacks from the best checkpoint
        if run.test and not trainer.fast_dev_run:
            test(run, trainer, module, dm, best, recorder)
        recorder.status = Status.COMPLETED
        return finished(recorder, trainer, maps, run)
    except MisconfigurationException as e:  # Lightning found a setting it cannot run (e.g. a limit below one batch)
        raise ConfigError(lightning_refused(e)) from None
    except BaseException:
        if recorder.status in (Status.INTERRUPTED, Status.DIVERGED, Status.PRUNED):  # an outcome, not a bug
            return finished(recorder, trainer, maps, run)
        raise
    finally:
        stops.trainer = None
        finish(loggers, completed=recorder.status == Status.COMPLETED, run_dir=run.out_dir)


def test(run: Run, trainer, module, dm, best, recorder: RunRecorder) -> None:
    """The best checkpoint on the test split (or validation, where the data has none). A setting
    Lightning refuses only now (e.g. trainer.limit_test_batches below one batch a rank) does not undo
    the training that is done and saved: the run completes, and its record says why it has no test."""
    module.stage_prefix["test"] = "test" if "test" in dm.splits else "best_val"
    try:
        results = trainer.test(module, datamodule=dm, ckpt_path=best.best_model_path or None, verbose=False,
                               weights_only=True)
    except MisconfigurationException as e:
        recorder.extra["test_skipped"] = lightning_refused(e)
        log.warning("not tested (training is complete and saved): %s", recorder.extra["test_skipped"])
        return
    recorder.test_metrics = results[0] if results else {}
    if module.stage_prefix["test"] == "test" and trainer.is_global_zero:
        try:
            test_reads.note(run.out_dir, "train test=true", best.best_model_path or None)
        except (OSError, FileRefused) as e:
            log.warning("the test read is not noted in %s (%s: %s)", run.out_dir, layout.TEST_READS, e)


def record_early_stop(recorder: RunRecorder, trainer) -> None:
    es = next((c for c in trainer.callbacks if isinstance(c, EarlyStopping)), None)
    if es is not None and "early_stopping" not in recorder.extra:
        recorder.extra["early_stopping"] = {"monitor": es.monitor, "patience": es.patience,
                                            "stopped_epoch": es.stopped_epoch or None}


def finished(recorder: RunRecorder, trainer, maps, run: Run) -> dict | None:
    """The final summary (the maps' section added), and for a completed run TensorBoard's HPARAMS
    record of its settings and final metrics."""
    if maps:
        recorder.extra["attention_maps"] = {"dir": str(run.out_dir / layout.MAPS), "alignment": maps.last_alignment,
                                            "timeline": maps.timeline_summary, "written": sorted(maps.written)}
    record_early_stop(recorder, trainer)
    result = recorder.write(trainer, recorder.status, error=recorder.error)
    if result and recorder.status == Status.COMPLETED:
        params, metrics = hparams_record(run, result)
        log_final_hparams(trainer.loggers, params, metrics, trainer.global_step)
    return result


def hparams_record(run: Run, result: dict) -> tuple[dict, dict]:
    """TensorBoard's HPARAMS tab: the settings runs are compared by (the main ones and every
    override) and the final metrics, under hp/ so the curves of the same names stay untouched."""
    c = run.config
    params = {"attention": c["attention"], "model": c["model"], "task": result["task"], "optim": c["optim"],
              "data": {k: c["data"].get(k) for k in ("name", "max_len", "batch_size", "kind", "remove")},
              "trainer": {"max_epochs": run.trainer.max_epochs}, "seed": run.seed, "tags": ",".join(run.tags)}
    flat = {}

    def walk(d, prefix=""):
        for k, v in d.items():
            if isinstance(v, dict):
                walk(v, f"{prefix}{k}.")
            else:
                flat[f"{prefix}{k}"] = v if isinstance(v, (int, float, str, bool)) else str(v)

    walk(params)
    for o in run.job.overrides or []:
        flat.setdefault(*split_override(o))
    m = result["metrics"]
    metrics = {f"hp/{k}": v for k, v in {**m["final"], **m["test"]}.items()}
    if m.get("best"):
        metrics["hp/best"] = m["best"]["value"]
    return flat, {k: v for k, v in metrics.items() if isinstance(v, (int, float))}
