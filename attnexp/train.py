"""`attnexp train`: build data, model and trainer from a validated `Run`, fit, test, and write
summary.json. Third-party objects (Trainer, loggers, extra callbacks) are built with Hydra's
`instantiate`; everything of ours is built from typed configs."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence

import lightning as L
import torch
from hydra.utils import instantiate
from lightning.pytorch.callbacks import LearningRateMonitor, ModelCheckpoint
from omegaconf import OmegaConf

from attnexp.config import check
from attnexp.data import build_datamodule
from attnexp.lit import AttnexpModule
from attnexp.maps.callback import AttentionMaps
from attnexp.recorder import RunRecorder
from attnexp.run import Run, training_on_cpu
from attnexp.summary import static_record


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
    logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(_DropAdverts())
    # Under Hydra the root logger already prints (and writes the job's .log): Lightning's own
    # console handlers would print every line twice.
    if logging.getLogger().handlers:
        for name in ("lightning", "lightning.pytorch", "lightning.fabric"):
            lg = logging.getLogger(name)
            for h in list(lg.handlers):
                lg.removeHandler(h)
            lg.propagate = True


def train(run: Run, callbacks: Sequence[L.Callback] = ()) -> dict:
    """Train one run into `run.out_dir`; returns the summary (also written to summary.json).
    `callbacks`: Lightning callbacks of the caller's, added to those the config builds."""
    out = run.out_dir
    out.mkdir(parents=True, exist_ok=True)
    (out / "config_resolved.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(run.config)))
    quiet_lightning()
    L.seed_everything(run.seed, workers=True, verbose=False)
    torch.set_float32_matmul_precision("high")

    dm = build_datamodule(run.data, run.task, causal=run.attention.causal, run_dir=str(out))
    dm.setup("fit")
    if run.task.name == "classify":
        check(dm.num_classes, f"data={run.data.name} has no labels for task=classify")
    module = AttnexpModule.from_configs(run.model, run.attention, run.task, run.optim, dm.vocab_size, dm.num_classes)

    data = {"name": run.data.name, "vocab_size": dm.vocab_size, "num_classes": dm.num_classes,
            **{f"n_{k}": len(v) for k, v in dm.splits.items()}}
    recorder = RunRecorder(out, static_record(run, module.model.num_params(), data))
    checkpoint = ModelCheckpoint(dirpath=out / "checkpoints", filename="best-epoch{epoch:02d}", monitor=run.checkpoint.monitor,
                                 mode=run.checkpoint.mode, save_top_k=1, save_last=True, auto_insert_metric_name=False)
    maps = AttentionMaps(run.maps, out) if run.maps.enabled else None
    callbacks = [checkpoint, recorder, *([maps] if maps else []), *callbacks]
    callbacks += [instantiate(c) for c in run.callbacks.values()]
    loggers = [instantiate(lg) for lg in run.loggers.values()]
    if loggers:
        callbacks.append(LearningRateMonitor(logging_interval="step"))

    trainer = instantiate({**run.trainer.kwargs(), "precision": resolve_precision(run)}, callbacks=callbacks,
                          logger=loggers or False, default_root_dir=str(out), _convert_="partial")
    trainer.fit(module, datamodule=dm, ckpt_path=run.resume)
    if run.test and not trainer.interrupted and not trainer.fast_dev_run:
        results = trainer.test(module, datamodule=dm, ckpt_path=checkpoint.best_model_path or None, verbose=False)
        recorder.test_metrics = results[0] if results else {}
    if maps:
        recorder.extra["attention_maps"] = {"dir": str(out / "maps"), "alignment": maps.last_alignment}
    return recorder.write(trainer, "interrupted" if trainer.interrupted else "completed")
