"""The LightningModule: owns the loss, the metrics and the optimizer; the model stays plain."""

from __future__ import annotations

import math
from dataclasses import asdict

import lightning as L
import torch
import torch.nn.functional as F

from attnexp.compat.lightning import clip_unscaled_fused, scales_gradients
from attnexp.config import AttentionConfig, ModelConfig, OptimConfig, TaskConfig, stage_metrics
from attnexp.config.data import IGNORE
from attnexp.model import Transformer, lm_loss
from attnexp.training.stops import Diverged

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
        # model.compile: the training and evaluation steps' forward *and loss* compiled together (Inductor
        # fuses the cross-entropy into the logits' graph: compiling the forward alone left GPT-2-small at
        # 0.88x nanoGPT's tokens/s on an H100, whose compiled forward holds its loss); the map probe
        # (need_weights) and checkpoints use self.model itself (no `_orig_mod.` in state_dict).
        object.__setattr__(self, "step_fn", torch.compile(self._forward_loss) if self.mcfg.compile else self._forward_loss)
        # Every metric is a running sum per stage on the device: loss x targets, targets, correct, and for a
        # classifier its confusion matrix (macro-F1 at the epoch's end). A few tiny ops a step and no host
        # read: torchmetrics' MulticlassF1Score.update sized its bincount from the labels, a read every
        # step on a GPU. Exact over any batching (a DDP rank's shard, a resumed epoch: the training
        # epoch's sums travel in checkpoints).
        self._sums: dict[str, torch.Tensor] = {}
        self._confusion: dict[str, torch.Tensor] = {}
        self.num_classes = num_classes
        unknown = [m for m in stage_metrics(self.tcfg.name) if m not in ("loss", "acc", "ppl", "f1_macro")]
        if unknown:
            raise ValueError(f"no metric is defined for {unknown} (attnexp.config.metrics lists them; "
                             f"attnexp.training.module computes them)")
        # What each stage's metrics are called. The test stage evaluates the best checkpoint on the test
        # split, or on the validation split when the data has none: then they are best_val/*, not test/*.
        self.stage_prefix = {"train": "train", "val": "val", "test": "test"}
        self.schedule_steps: int | None = None  # the schedule's length, kept when a run resumes
        self.skipped = self._skips_in_a_row = 0  # optim.nonfinite=skip
        self.data_identity: dict | None = None  # the DataModule's identity(): saved in every checkpoint
        self.diverged_at: torch.Tensor | None = None  # the StopGuard's device-side step of the first bad loss
        self._step_loss: torch.Tensor | None = None  # this step's loss, until on_train_batch_end
        self.host_step_loss: torch.Tensor | None = None  # the last logged step loss, on the host (the StopGuard takes it)
        self.last_logged_loss: float | None = None  # the same as a number, kept for the progress lines of a log

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

    def forward(self, input_ids, pad_mask=None, need_weights=False):
        return self.model(input_ids, pad_mask, need_weights=need_weights)

    def _forward_loss(self, input_ids, pad, labels) -> tuple[torch.Tensor, ...]:
        """The loss, the targets, the right ones, and a classifier's predictions (else None)."""
        logits = self.model(input_ids, pad).logits
        loss, count, correct = self.loss_and_counts(logits, labels)
        return loss, count, correct, logits.detach().argmax(-1) if self.classify else None

    def model_step(self, batch: dict, stage: str) -> torch.Tensor:
        return self._step(batch, stage)[0]

    def _step(self, batch: dict, stage: str) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The loss (its sums kept for the epoch's metrics) and a classifier's predictions, else None."""
        pad = batch["pad_mask"] if batch.get("padded", True) else None
        labels = batch["labels"]
        loss, count, correct, pred = self.step_fn(batch["input_ids"], pad, labels)
        if self.classify:
            self._count_confusion(stage, pred, labels)
        sums = torch.stack([loss.detach().float() * count, count.float(), correct.float()])
        self._sums[stage] = sums if stage not in self._sums else self._sums[stage] + sums
        self._step_count = count
        return loss, pred

    def _count_confusion(self, stage: str, pred: torch.Tensor, labels: torch.Tensor) -> None:
        """(true, predicted) counts on the device; an ignored label goes to a last bin that is dropped."""
        C = self.num_classes
        if stage not in self._confusion:
            self._confusion[stage] = torch.zeros(C * C + 1, device=pred.device)
        cell = torch.where((labels >= 0) & (labels < C), labels * C + pred, C * C)
        self._confusion[stage].index_add_(0, cell.flatten(), torch.ones(cell.numel(), device=pred.device))

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
        loss, acc = torch.stack([loss.float(), correct / count.clamp_min(1)]).tolist()  # one read, not two
        return loss, acc

    def log_epoch_metrics(self, stage: str) -> None:
        """The stage's metrics from its sums, brought to the host in one read (stacked) and logged as
        host numbers, which Lightning then converts for free (device tensors were read once each, and
        again for the progress bar)."""
        prefix = self.stage_prefix[stage]
        sums, conf = self._sums.pop(stage, None), self._confusion.pop(stage, None)
        if sums is None:
            return
        if self.trainer.world_size > 1:  # every rank saw its own shard: sum the sums, then divide
            sums = self.trainer.strategy.reduce(sums, reduce_op="sum")
            conf = None if conf is None else self.trainer.strategy.reduce(conf, reduce_op="sum")
        n = sums[1].clamp_min(1)
        loss = sums[0] / n
        values = {f"{prefix}/loss" if stage != "train" else "train/loss_epoch": loss, f"{prefix}/acc": sums[2] / n}
        if not self.classify and stage != "train":  # train ppl = exp(train/loss_epoch)
            values[f"{prefix}/ppl"] = loss.exp()
        if self.classify:
            values[f"{prefix}/f1_macro"] = macro_f1(conf, self.num_classes) if conf is not None else torch.zeros_like(loss)
        host = torch.stack([v.float() for v in values.values()]).to("cpu", copy=True)  # the one read
        self.log_dict(dict(zip(values, host.unbind())), prog_bar=stage != "train")

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
        self._step_loss = loss
        return self.global_batch_share(loss)

    def global_batch_share(self, loss: torch.Tensor) -> torch.Tensor:
        """Under DDP, this rank's mean loss weighted by its share of the global batch's targets (one
        all-reduce of the target count a step): DDP averages the ranks' gradients, which is the global
        batch's gradient only when every rank has as many targets; weighted so, it is on any data (a
        rank's batch of short sentences counts for its targets, not as much as one of long posts)."""
        if self.trainer.world_size == 1:
            return loss
        count = self._step_count.float()
        total = self.trainer.strategy.reduce(count.clone(), reduce_op="sum")
        return loss * count * self.trainer.world_size / total.clamp_min(1)

    _step_count: torch.Tensor | None = None  # the targets the last model_step's loss averaged over

    def on_train_batch_end(self, outputs, batch, batch_idx):
        """At a logging step, the step's loss (under DDP, the global batch's: one all-reduce at a logging
        step) comes to the host in one read, after the whole step is queued, and is logged as a host
        number: Lightning's conversions of it (for the loggers and the progress bar, at every step's
        end) then read nothing from the device."""
        every = self.trainer.log_every_n_steps
        loss, self._step_loss = self._step_loss, None
        if loss is None or not every or (self.global_step % every) != 0 or not self.step_loss_shown:
            return  # global_step has counted this step already: the same steps Lightning logs at
        loss = self.logged_loss(loss).float()
        if self.trainer.world_size > 1:  # the global batch's loss: every rank's, weighted by its targets (not rank 0's)
            total = self.trainer.strategy.reduce(torch.stack([loss * self._step_count, self._step_count.float()]),
                                                 reduce_op="sum")
            loss = total[0] / total[1].clamp_min(1)
        self.host_step_loss = loss.to("cpu", copy=True)
        self.last_logged_loss = float(self.host_step_loss)  # already on the host: no wait for the device
        self.log("train/loss", self.host_step_loss, on_step=True, on_epoch=False, prog_bar=True)

    def logged_loss(self, loss: torch.Tensor) -> torch.Tensor:
        """The step's loss as logged: NaN from the first non-finite loss on (the StopGuard's device-side
        flag), so the one read Lightning makes of it also tells the guard whether the run diverged."""
        if self.diverged_at is None:
            return loss.detach()
        return torch.where(self.diverged_at >= 0, torch.full_like(loss, float("nan")), loss.detach())

    @property
    def step_loss_shown(self) -> bool:
        """Whether anything shows the per-step loss (a logger, the progress bar, the progress lines of a log)."""
        return (bool(self.trainer.loggers) or self.trainer.progress_bar_callback is not None
                or any(getattr(cb, "shows_step_loss", False) for cb in self.trainer.callbacks))

    def validation_step(self, batch, batch_idx):
        self.model_step(batch, "val")

    def test_step(self, batch, batch_idx):
        """A classifier's predictions and labels, on the device (Lightning hands them to callbacks:
        `attnexp eval` keeps them for predictions.json); None for a language model."""
        pred = self._step(batch, "test")[1]
        return None if pred is None else (pred, batch["labels"])

    def configure_optimizers(self):
        # optim.total_steps if set; else the length of the schedule this run started with (restored
        # by on_load_checkpoint, which runs first), so a resumed run continues the same curve.
        self.schedule_steps = self.ocfg.total_steps or self.schedule_steps or max(1, int(self.trainer.estimated_stepping_batches))
        # fused AdamW on every device (the CPU has one since torch 2.4: the same code path, and the for-each
        # version reads each parameter's step count with .item()), except where a GradScaler would have to
        # unscale before clipping (16-mixed)
        fused = self.device.type in ("cuda", "cpu") and not (self.trainer.gradient_clip_val and scales_gradients(self.trainer))
        opt, sched = adamw_warmup_cosine(self.parameters(), self.ocfg, self.schedule_steps, fused=fused)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None):
        if not clip_unscaled_fused(self.trainer, optimizer, gradient_clip_val, gradient_clip_algorithm):
            super().configure_gradient_clipping(optimizer, gradient_clip_val, gradient_clip_algorithm)

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        train, conf = self._sums.get("train"), self._confusion.get("train")
        checkpoint["attnexp"] = {"schedule_steps": self.schedule_steps, "skipped": self.skipped,
                                 "train_sums": train.tolist() if train is not None else None,
                                 "train_confusion": conf.tolist() if conf is not None else None}
        checkpoint["data_identity"] = self.data_identity  # what it was trained on: a resume onto other data is refused

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        state = checkpoint.get("attnexp", {})
        self.schedule_steps = state.get("schedule_steps")
        self.skipped = state.get("skipped", 0)
        if state.get("train_sums") is not None:
            self._sums["train"] = torch.tensor(state["train_sums"], device=self.device)
        if state.get("train_confusion") is not None and self.num_classes:
            conf = torch.tensor(state["train_confusion"], device=self.device, dtype=torch.float)
            if conf.numel() == self.num_classes ** 2 + 1:
                self._confusion["train"] = conf
        # checkpoints of attnexp before every metric became a sum hold torchmetrics' accuracy, perplexity
        # and F1 states: not needed any more, so they do not stop a resume (an epoch resumed halfway
        # from such a checkpoint starts its F1 counts afresh)
        own = set(self.state_dict())
        for k in [k for k in checkpoint.get("state_dict", {}) if k.startswith("metrics.") and k not in own]:
            del checkpoint["state_dict"][k]


def macro_f1(conf: torch.Tensor, C: int) -> torch.Tensor:
    """Macro-F1 from a flattened (true, predicted) count matrix (plus its dropped last bin), as
    torchmetrics' MulticlassF1Score(average="macro") computes it: each class's 2TP / (2TP + FP + FN),
    averaged over the classes that occur as a label or a prediction (a test checks the two agree)."""
    m = conf[: C * C].view(C, C)
    tp = m.diagonal()
    fp, fn = m.sum(0) - tp, m.sum(1) - tp
    denom = 2 * tp + fp + fn
    f1 = torch.where(denom > 0, 2 * tp / denom.clamp_min(1e-12), torch.zeros_like(tp))
    present = (denom > 0).float()
    return (f1 * present).sum() / present.sum().clamp_min(1)


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
