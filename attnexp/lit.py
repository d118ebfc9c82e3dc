"""The LightningModule: owns the loss, the metrics and the optimizer; the model stays plain."""

from __future__ import annotations

import math
from dataclasses import asdict

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torchmetrics import MetricCollection
from torchmetrics.classification import MulticlassAccuracy, MulticlassF1Score
from torchmetrics.text import Perplexity

from attnexp.config import AttentionConfig, ModelConfig, OptimConfig, TaskConfig, stage_metrics
from attnexp.data.collate import IGNORE
from attnexp.model import Transformer, lm_loss
from attnexp.stops import Diverged

STAGES = ("train", "val", "test")
MAX_SKIPS_IN_A_ROW = 10  # optim.nonfinite=skip gives up (status diverged) after this many bad batches in a row


class AttnexpModule(L.LightningModule):
    def __init__(self, model: dict, attention: dict, task: dict, optim: dict, vocab_size: int,
                 num_classes: int | None = None):
        super().__init__()
        self.save_hyperparameters()  # plain dicts: load_from_checkpoint rebuilds everything
        self.mcfg, self.acfg = ModelConfig(**model), AttentionConfig(**attention)
        self.tcfg, self.ocfg = TaskConfig(**task), OptimConfig(**optim)
        self.classify = self.tcfg.name == "classify"
        self.model = Transformer(self.mcfg, self.acfg, vocab_size, head="classify" if self.classify else "lm",
                                 num_classes=num_classes, pooling=self.tcfg.pooling)
        self.metrics = nn.ModuleDict({f"{s}_": self._metrics(vocab_size, num_classes, s) for s in STAGES})  # "train" is a Module method
        # The training epoch's running metrics travel in checkpoints, so an epoch resumed halfway
        # reports what the uninterrupted epoch would have (validation and test finish within a pass).
        self.metrics["train_"].persistent(True)
        self._loss_sums: dict[str, tuple] = {}  # stage -> (sum of loss * targets, targets), on the device
        self.schedule_steps: int | None = None  # the schedule's length, kept when a run resumes
        self.skipped = self._skips_in_a_row = 0  # optim.nonfinite=skip

    @classmethod
    def from_configs(cls, m: ModelConfig, a: AttentionConfig, t: TaskConfig, o: OptimConfig, vocab_size: int,
                     num_classes: int | None) -> "AttnexpModule":
        return cls(asdict(m), asdict(a), asdict(t), asdict(o), vocab_size, num_classes)

    def _metrics(self, vocab_size: int, num_classes: int | None, stage: str) -> MetricCollection:
        # validate_args=False: the checks look at label values (torch.unique), a device sync every step.
        n, ignore = (num_classes, None) if self.classify else (vocab_size, IGNORE)
        make = {"acc": lambda: MulticlassAccuracy(n, average="micro", ignore_index=ignore, validate_args=False),
                "f1_macro": lambda: MulticlassF1Score(n, average="macro", validate_args=False),
                "ppl": lambda: Perplexity(ignore_index=IGNORE)}
        names = [m for m in stage_metrics(self.tcfg.name) if m != "loss"]  # the loss is summed by model_step
        if stage == "train":  # a second log_softmax over (B, T, V) every step; train ppl = exp(train/loss)
            names = [m for m in names if m != "ppl"]
        return MetricCollection({m: make[m]() for m in names})

    def forward(self, input_ids, pad_mask=None, need_weights=False):
        return self.model(input_ids, pad_mask, need_weights=need_weights)

    def model_step(self, batch: dict, stage: str) -> torch.Tensor:
        pad = batch["pad_mask"] if batch.get("padded", True) else None
        logits = self.model(batch["input_ids"], pad).logits
        labels = batch["labels"]
        metrics = self.metrics[f"{stage}_"]
        if self.classify:
            loss = F.cross_entropy(logits, labels)
            metrics.update(logits.detach(), labels)
        else:
            loss = lm_loss(logits, labels)
            metrics["acc"].update(logits.detach().flatten(0, 1), labels.flatten())
            if "ppl" in metrics:
                metrics["ppl"].update(logits.detach().float(), labels)
        # For the epoch mean over every target (token, or sequence when classifying), whatever the
        # batching (a DDP rank's shard, a resumed epoch): sums on the device, no host sync.
        count = labels.numel() if self.classify else (labels != IGNORE).sum()
        weighted, n = self._loss_sums.get(stage, (0.0, 0))
        self._loss_sums[stage] = (loss.detach().float() * count + weighted, n + count)
        return loss

    def log_epoch_metrics(self, stage: str) -> None:
        # Loss and metrics accumulate on the device every step and are logged once an epoch. Each
        # self.log call costs ~1 ms of host time (Lightning deep-copies its metadata every call),
        # 6-7% of a tiny model's step on 2 CPU cores and more against a GPU's short steps.
        metrics = self.metrics[f"{stage}_"]
        values = {f"{stage}/{k}": v for k, v in metrics.compute().items()}
        metrics.reset()
        weighted, n = self._loss_sums.pop(stage, (0.0, 0))
        total = torch.stack([torch.as_tensor(weighted, dtype=torch.float32, device=self.device),
                             torch.as_tensor(n, dtype=torch.float32, device=self.device)])
        if self.trainer.world_size > 1:  # every rank saw its own shard: sum the sums, then divide
            total = self.trainer.strategy.reduce(total, reduce_op="sum")
        if not isinstance(n, int) or n:
            values[f"{stage}/loss" if stage != "train" else "train/loss_epoch"] = total[0] / total[1].clamp_min(1)
        self.log_dict(values, prog_bar=stage != "train")

    def on_train_epoch_end(self):
        self.log_epoch_metrics("train")

    def on_validation_epoch_end(self):
        self.log_epoch_metrics("val")

    def on_test_epoch_end(self):
        self.log_epoch_metrics("test")

    def training_step(self, batch, batch_idx):
        loss = self.model_step(batch, "train")
        if self.ocfg.nonfinite == "skip" and not torch.isfinite(loss):  # a host sync: the price of skipping
            self.skipped += 1
            self._skips_in_a_row += 1
            if self._skips_in_a_row > MAX_SKIPS_IN_A_ROW:
                raise Diverged(f"the training loss was not finite for {self._skips_in_a_row} batches in a row up to "
                               f"step {self.global_step}; skipping them did not help (optim.nonfinite=skip)")
            return None  # Lightning skips backward and the optimizer step
        self._skips_in_a_row = 0
        every = self.trainer.log_every_n_steps
        if every and (self.global_step + 1) % every == 0:  # the steps at which Lightning writes to the loggers
            self.log("train/loss", loss, on_step=True, on_epoch=False, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        self.model_step(batch, "val")

    def test_step(self, batch, batch_idx):
        self.model_step(batch, "test")

    def configure_optimizers(self):
        # optim.total_steps if set; else the length of the schedule this run started with (restored
        # by on_load_checkpoint, which runs first), so a resumed run continues the same curve.
        self.schedule_steps = self.ocfg.total_steps or self.schedule_steps or max(1, int(self.trainer.estimated_stepping_batches))
        opt, sched = adamw_warmup_cosine(self.parameters(), self.ocfg, self.schedule_steps, fused=self.device.type == "cuda")
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        sums = {k: [float(w), float(n)] for k, (w, n) in self._loss_sums.items() if k == "train"}
        checkpoint["attnexp"] = {"schedule_steps": self.schedule_steps, "train_loss_sum": sums, "skipped": self.skipped}

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        state = checkpoint.get("attnexp", {})
        self.schedule_steps = state.get("schedule_steps")
        self.skipped = state.get("skipped", 0)
        self._loss_sums.update({k: (torch.tensor(w, device=self.device), torch.tensor(n, device=self.device))
                                for k, (w, n) in state.get("train_loss_sum", {}).items()})


def adamw_warmup_cosine(parameters, o: OptimConfig, total_steps: int, fused: bool = False):
    """AdamW without decay on norms and biases, and a per-step warmup + cosine LambdaLR."""
    params = [p for p in parameters if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": o.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=o.lr, betas=tuple(o.betas), fused=fused)
    return opt, torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(o.warmup_steps, total_steps, o.min_lr_ratio))


def warmup_cosine(warmup: int, total: int, min_ratio: float):
    """Linear warmup to 1, then cosine decay to `min_ratio` at `total` steps (nanoGPT's schedule)."""
    warmup = min(warmup, max(total - 1, 0))

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / (warmup + 1)
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return factor
