"""RunRecorder: what a running Trainer adds to summary.json (metrics, steps, time, tokens, device);
the layout and the static part are attnexp.summary's."""

from __future__ import annotations

import platform
import resource
import time
from pathlib import Path

import lightning as L
from lightning.pytorch.utilities import rank_zero_warn
import torch

from attnexp.summary import head, versions, write_json


def device_name(trainer: L.Trainer | None) -> str:
    if trainer is not None and trainer.strategy.root_device.type == "cuda":
        return torch.cuda.get_device_name(trainer.strategy.root_device)
    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def peak_memory_mb(trainer: L.Trainer | None) -> dict:
    out = {"cpu_max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
    if trainer is not None and trainer.strategy.root_device.type == "cuda":
        out["cuda_max_allocated_mb"] = round(torch.cuda.max_memory_allocated(trainer.strategy.root_device) / 2**20, 1)
    return out


def _floats(metrics: dict) -> dict:
    return {k: round(float(v), 6) for k, v in sorted(metrics.items())}


class RunRecorder(L.Callback):
    """Counts real (non-padding) training tokens and times the fit, then writes summary.json,
    also when the run stops on an exception or Ctrl-C (status "interrupted" / "failed")."""

    def __init__(self, out_dir: Path, static: dict):
        self.out_dir, self.static = Path(out_dir), static
        self.t_start = time.perf_counter()
        self.t_fit0 = self.t_fit1 = None
        self.tokens = None  # a device tensor: no host sync per step
        self.test_metrics: dict = {}
        self.final_val: dict = {}
        self.history: list[dict] = []  # validation metrics after every epoch
        self.extra: dict = {}  # more sections, e.g. attention_maps

    def on_train_start(self, trainer, pl_module):
        self.t_fit0 = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        n = batch["pad_mask"].sum()
        self.tokens = n if self.tokens is None else self.tokens + n

    def on_validation_end(self, trainer, pl_module):
        # not on_validation_epoch_end: callbacks run before the module's hook, which logs the epoch's metrics
        if not trainer.sanity_checking:
            self.final_val = {k: v for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
            self.history.append({"epoch": trainer.current_epoch, "step": trainer.global_step, **_floats(self.final_val)})

    def on_train_end(self, trainer, pl_module):
        self.t_fit1 = time.perf_counter()

    def on_exception(self, trainer, pl_module, exception):
        """Keep what was trained: a checkpoint of the moment, then the summary saying why it stopped."""
        try:
            trainer.save_checkpoint(self.out_dir / "checkpoints" / "on_exception.ckpt")
        except Exception as e:  # the exception may have left no state worth saving
            rank_zero_warn(f"could not save a checkpoint after {type(exception).__name__}: {e}")
        status = "interrupted" if isinstance(exception, KeyboardInterrupt) else "failed"
        self.write(trainer, status, error=f"{type(exception).__name__}: {exception}")

    def write(self, trainer: L.Trainer | None, status: str, error: str | None = None) -> dict:
        fit_end = self.t_fit1 or time.perf_counter()
        train_s = (fit_end - self.t_fit0) if self.t_fit0 else 0.0
        tokens = int(self.tokens) if self.tokens is not None else 0
        ckpt = getattr(trainer, "checkpoint_callback", None) if trainer else None
        best = None
        if ckpt is not None and ckpt.best_model_score is not None:
            best = {"monitor": ckpt.monitor, "value": round(float(ckpt.best_model_score), 6),
                    "checkpoint": ckpt.best_model_path}
        summary = {
            **head(status, error, self.out_dir),
            **self.static,
            "metrics": {"final": _floats(self.final_val), "best": best, "test": _floats(self.test_metrics),
                        "history": self.history},
            "steps": trainer.global_step if trainer else 0,
            "epochs": trainer.current_epoch if trainer else 0,
            "wall_time_s": round(time.perf_counter() - self.t_start, 2),
            "train_time_s": round(train_s, 2),
            "train_tokens": tokens,
            "tokens_per_s": round(tokens / train_s, 1) if train_s > 0 else None,
            "device": device_name(trainer),
            "precision": str(trainer.precision) if trainer else None,
            "peak_memory": peak_memory_mb(trainer),
            "checkpoints": {"last": str(self.out_dir / "checkpoints" / "last.ckpt") if (self.out_dir / "checkpoints" / "last.ckpt").exists() else None,
                            "best": best["checkpoint"] if best else None},
            **self.extra,
            "versions": versions(),
        }
        self.out_dir.mkdir(parents=True, exist_ok=True)
        write_json(self.out_dir / "summary.json", summary)
        return summary
