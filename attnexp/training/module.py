"""The LightningModule: owns the loss, the metrics and the optimizer; the model stays plain."""

from __future__ import annotations

import math
from dataclasses import asdict

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torchmetrics import MetricCollection
from torchmetrics.classification import MulticlassF1Score

from attnexp.compat.lightning import clip_unscaled_fused, scales_gradients
from attnexp.config import AttentionConfig, ModelConfig, OptimConfig, TaskConfig, stage_metrics
from attnexp.data.collate import IGNORE
from attnexp.model import Transformer, lm_loss
from attnexp.training.stops import Diverged

STAGES = ("train", "val", "test")
SUMS = ("loss", "acc", "ppl")  # kept as running sums on the device (below); the rest are torchmetrics objects
TORCHMETRICS = {  # validate_args=False: the checks look at label values (torch.unique), a device sync every step
    "f1_macro": lambda num_classes: MulticlassF1Score(num_classes, average="macro", validate_args=False),
}
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
        if self.ocfg.freeze_encoder:  # a classifier on a frozen encoder: only the head's parameters train
            for name, p in self.model.named_parameters():
                p.requires_grad_(name.startswith("head."))
        # model.compile: a compiled view of the same modules for the training and evaluation steps; the
        # map probe (need_weights) and checkpoints use self.model itself (no `_orig_mod.` in state_dict).
        object.__setattr__(self, "forward_fn", torch.compile(self.model) if self.mcfg.compile else self.model)
        # Loss and accuracy are three running sums per stage on the device (loss x targets, targets,
        # correct): a few tiny ops a step, no host sync, exact over any batching (a DDP rank's shard, a
        # resumed epoch). torchmetrics keeps what sums cannot give (classification's macro-F1).
        self._sums: dict[str, torch.Tensor] = {}
        self.metrics = nn.ModuleDict({f"{s}_": self._metrics(num_classes) for s in STAGES})  # "train" is a Module method
        # The training epoch's running metrics travel in checkpoints, so an epoch resumed halfway
        # reports what the uninterrupted epoch would have (validation and test finish within a pass).
        self.metrics["train_"].persistent(True)
        # What each stage's metrics are called. The test stage evaluates the best checkpoint on the test
        # split, or on the validation split when the data has none: then they are best_val/*, not test/*.
        self.stage_prefix = {"train": "train", "val": "val", "test": "test"}
        self.schedule_steps: int | None = None  # the schedule's length, kept when a run resumes
        self.skipped = self._skips_in_a_row = 0  # optim.nonfinite=skip
        self.data_identity: dict | None = None  # the DataModule's identity(): saved in every checkpoint

    def train(self, mode: bool = True):
        """A frozen encoder stays in eval mode (no dropout) while its head trains."""
        super().train(mode)
        if self.ocfg.freeze_encoder:
            for name, child in self.model.named_children():
                if name != "head":
                    child.eval()
        return self

    @classmethod
    def from_configs(cls, m: ModelConfig, a: AttentionConfig, t: TaskConfig, o: OptimConfig, vocab_size: int,
                     num_classes: int | None) -> AttnexpModule:
        return cls(asdict(m), asdict(a), asdict(t), asdict(o), vocab_size, num_classes)

    def _metrics(self, num_classes: int | None) -> MetricCollection:
        # acc and loss come from self._sums and ppl = exp(loss): torchmetrics' own accuracy update costs
        # ~0.2 ms of host time a step and Perplexity a second log_softmax over (B, T, V).
        names = [m for m in stage_metrics(self.tcfg.name) if m not in SUMS]
        unknown = [m for m in names if m not in TORCHMETRICS]
        if unknown:
            raise ValueError(f"no metric is defined for {unknown} (attnexp.config.metrics lists them; "
                             f"attnexp.training.module.TORCHMETRICS builds them)")
        return MetricCollection({m: TORCHMETRICS[m](num_classes) for m in names})

    def forward(self, input_ids, pad_mask=None, need_weights=False):
        return self.model(input_ids, pad_mask, need_weights=need_weights)

    def model_step(self, batch: dict, stage: str) -> torch.Tensor:
        pad = batch["pad_mask"] if batch.get("padded", True) else None
        logits = self.forward_fn(batch["input_ids"], pad).logits
        labels = batch["labels"]
        loss, count, correct = self.loss_and_counts(logits, labels)
        if self.classify:
            self.metrics[f"{stage}_"].update(logits.detach(), labels)
        sums = torch.stack([loss.detach().float() * count, count.float(), correct.float()])
        self._sums[stage] = sums if stage not in self._sums else self._sums[stage] + sums
        return loss

    def loss_and_counts(self, logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The loss, the targets (tokens with a label, or sequences) and how many of them the argmax
        gets right: what a training step sums and what head importance measures."""
        loss = F.cross_entropy(logits, labels) if self.classify else lm_loss(logits, labels)
        count = (labels != IGNORE).sum()
        correct = (logits.detach().argmax(-1) == labels).sum()  # an IGNORE label never equals a class
        return loss, count, correct

    @torch.no_grad()
    def evaluate(self, batch: dict, head_mask_LH: torch.Tensor | None = None) -> tuple[float, float]:
        """(loss, accuracy) of the model in eval mode on one batch, with some heads silenced
        (head_mask_LH: 1 keeps, 0 silences): head importance (attnexp.heads.importance)."""
        from attnexp.heads.probe import eval_mode

        with eval_mode(self.model):
            dev = self.device
            pad = batch["pad_mask"].to(dev) if batch.get("padded", True) else None
            mask = None if head_mask_LH is None else head_mask_LH.to(dev)
            logits = self.model(batch["input_ids"].to(dev), pad, head_mask_LH=mask).logits.float()
            loss, count, correct = self.loss_and_counts(logits, batch["labels"].to(dev))
        return float(loss), float(correct / count.clamp_min(1))

    def log_epoch_metrics(self, stage: str) -> None:
        # Logged once an epoch: each self.log call costs ~1 ms of host time (Lightning deep-copies its
        # metadata every call), 6-7% of a tiny model's step on 2 CPU cores.
        metrics = self.metrics[f"{stage}_"]
        prefix = self.stage_prefix[stage]
        values = {f"{prefix}/{k}": v for k, v in metrics.compute().items()} if metrics else {}
        metrics.reset()
        sums = self._sums.pop(stage, None)
        if sums is not None:
            if self.trainer.world_size > 1:  # every rank saw its own shard: sum the sums, then divide
                sums = self.trainer.strategy.reduce(sums, reduce_op="sum")
            n = sums[1].clamp_min(1)
            loss = sums[0] / n
            values[f"{prefix}/loss" if stage != "train" else "train/loss_epoch"] = loss
            values[f"{prefix}/acc"] = sums[2] / n
            if not self.classify and stage != "train":  # train ppl = exp(train/loss_epoch)
                values[f"{prefix}/ppl"] = loss.exp()
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
        if every and (self.global_step + 1) % every == 0 and self._step_loss_seen:  # when Lightning writes to loggers
            self.log("train/loss", loss, on_step=True, on_epoch=False, prog_bar=True)
        return loss

    @property
    def _step_loss_seen(self) -> bool:
        """Whether anything shows the per-step loss (a logger, the progress bar)."""
        return bool(self.trainer.loggers) or self.trainer.progress_bar_callback is not None

    def validation_step(self, batch, batch_idx):
        self.model_step(batch, "val")

    def test_step(self, batch, batch_idx):
        self.model_step(batch, "test")

    def configure_optimizers(self):
        # optim.total_steps if set; else the length of the schedule this run started with (restored
        # by on_load_checkpoint, which runs first), so a resumed run continues the same curve.
        self.schedule_steps = self.ocfg.total_steps or self.schedule_steps or max(1, int(self.trainer.estimated_stepping_batches))
        # fused AdamW on a GPU, except where a GradScaler would have to unscale before clipping (16-mixed)
        fused = self.device.type == "cuda" and not (self.trainer.gradient_clip_val and scales_gradients(self.trainer))
        opt, sched = adamw_warmup_cosine(self.parameters(), self.ocfg, self.schedule_steps, fused=fused)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None):
        if not clip_unscaled_fused(self.trainer, optimizer, gradient_clip_val, gradient_clip_algorithm):
            super().configure_gradient_clipping(optimizer, gradient_clip_val, gradient_clip_algorithm)

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        train = self._sums.get("train")
        checkpoint["attnexp"] = {"schedule_steps": self.schedule_steps, "skipped": self.skipped,
                                 "train_sums": train.tolist() if train is not None else None}
        checkpoint["data_identity"] = self.data_identity  # what it was trained on: a resume onto other data is refused

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        state = checkpoint.get("attnexp", {})
        self.schedule_steps = state.get("schedule_steps")
        self.skipped = state.get("skipped", 0)
        if state.get("train_sums") is not None:
            self._sums["train"] = torch.tensor(state["train_sums"], device=self.device)
        # checkpoints of attnexp before loss and accuracy became sums hold torchmetrics' accuracy and
        # perplexity states: not needed any more, so they do not stop a resume
        own = set(self.state_dict())
        for k in [k for k in checkpoint.get("state_dict", {}) if k.startswith("metrics.") and k not in own]:
            del checkpoint["state_dict"][k]


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
