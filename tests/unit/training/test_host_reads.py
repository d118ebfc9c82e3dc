"""No training step waits for the host: a whole `fit` through the real Trainer, with the default
settings (a logger and the maps on, the progress bar on and off), a language model and a classifier,
counting every call that would make a GPU's host wait for the device. Between logging steps there
is none; a logging step reads what it logs at most once. Before: the default run read 1.17 times a
step (train/loss on the progress bar was converted to a number every step), 2.15 in a terminal, a
classifier 1 more (torchmetrics' bincount), and the CPU path read every step's loss (float(loss),
a branch the GPU never took)."""

from __future__ import annotations

import lightning as L
import pytest

from attnexp.api import train
from helpers.host_reads import Counter, DispatchReads, FunctionReads, StepMarks
from helpers.runs import run_of

# ~135 steps: more than the timeline's 64 readings (dense early), so most steps are neither a logging nor a
# reading step and are checked (before: 18 steps, every one of them a reading step, so 0 were checked)
SMALL = ["data.n_sentences=600", "data.batch_size=8", "trainer.max_epochs=2", "trainer.log_every_n_steps=5",
         "maps.n_examples=2", "maps.animation=false", "test=false"]


@pytest.mark.parametrize("overrides", [
    ["logger=tensorboard", "trainer.enable_progress_bar=false"],
    ["logger=tensorboard", "trainer.enable_progress_bar=true"],
    ["logger=csv", "task=classify", "trainer.enable_progress_bar=true"],
    ["logger=none", "maps.enabled=false", "trainer.enable_progress_bar=false"],
    ["logger=tensorboard", "trainer.enable_progress_bar=true", "+terminal"],
], ids=["tensorboard", "tensorboard-progress-bar", "classifier", "lean", "progress-bar-in-a-terminal"])
def test_no_training_step_between_logging_steps_reads_the_device(overrides, tmp_path, monkeypatch):
    from attnexp.training.console import EpochLines

    if "+terminal" in overrides:  # Lightning's TQDM bar, as a terminal gets it
        from attnexp.training import build

        monkeypatch.setattr(build, "interactive", lambda: True)
        overrides = [o for o in overrides if o != "+terminal"]
    monkeypatch.setattr(EpochLines, "EVERY_S", 0.0)  # without a bar, the progress line every step (it read the loss)
    c = Counter()
    marks = StepMarks(c)
    with FunctionReads(c), DispatchReads(c):
        s = train(run_of([*SMALL, *overrides], tmp_path), callbacks=[marks])
    assert s["status"] == "completed"
    assert len(marks.steps) > 100 and marks.logging_steps
    if "maps.enabled=false" not in overrides:  # the timeline's light readings: a few tens, dense early, no more
        assert 0 < len(marks.reading_steps) <= 64 and min(marks.reading_steps) == 0, sorted(marks.reading_steps)
    assert len(marks.checked_steps()) >= 30, len(marks.checked_steps())  # the check is not vacuous
    between = marks.between_logging_steps()
    assert not between, {k: v for k, v in list(between.items())[:3]}
    # a timeline reading takes what it needs from the device in one transfer (issue 54: it made four)
    readings = {s: r for s, r in c.per_step.items() if s in marks.reading_steps - marks.logging_steps - marks.last_of_epoch}
    assert all(len(r) <= 1 for r in readings.values()), {k: v for k, v in readings.items() if len(v) > 1}
    heavy = {k: v for k, v in marks.at_logging_steps().items() if len(v) > 1}
    assert not heavy, {k: v for k, v in list(heavy.items())[:3]}


class PlantedRead(L.Callback):
    """What the progress line did before: the step's loss converted to a number after every step."""

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        float(outputs["loss"])


def test_a_planted_read_between_logging_steps_is_caught(tmp_path):
    """The check can fail: the same run with one read planted in every step."""
    c = Counter()
    marks = StepMarks(c)
    with FunctionReads(c), DispatchReads(c):
        train(run_of([*SMALL, "logger=none", "trainer.enable_progress_bar=false"], tmp_path),
              callbacks=[marks, PlantedRead()])
    between = marks.between_logging_steps()
    assert len(between) >= 30 and all(any("__float__" in r or "item" in r for r in reads) for reads in between.values())


def test_the_device_side_macro_f1_equals_torchmetrics():
    """The classifier's macro-F1 comes from a confusion matrix summed on the device (torchmetrics'
    update read the device every step); it must equal torchmetrics' MulticlassF1Score(average="macro")
    on the same predictions, absent classes included."""
    import torch
    from torchmetrics.classification import MulticlassF1Score

    from attnexp.training.module import macro_f1

    g = torch.Generator().manual_seed(0)
    for C, n in ((5, 40), (20, 300), (7, 3)):
        labels = torch.randint(0, C - 1, (n,), generator=g)  # the last class never occurs as a label
        pred = torch.where(torch.rand(n, generator=g) < 0.6, labels, torch.randint(0, C, (n,), generator=g))
        conf = torch.zeros(C * C + 1)
        conf.index_add_(0, labels * C + pred, torch.ones(n))
        want = MulticlassF1Score(C, average="macro")(pred, labels)
        assert float(macro_f1(conf, C)) == pytest.approx(float(want), abs=1e-6), (C, n)


class SyncErrors(StepMarks):
    """On a GPU: `torch.cuda.set_sync_debug_mode("error")` for every training step that is neither a
    logging step, an epoch's last nor one the timeline reads after (from its batch start to the next
    one's), so a sync anywhere in such a step (the module, Lightning, a callback, a logger) raises."""

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        import torch

        super().on_train_batch_start(trainer, pl_module, batch, batch_idx)
        s = trainer.global_step
        quiet = s >= 2 and s not in self.logging_steps | self.last_of_epoch | self.reading_steps  # 2: warm-up
        torch.cuda.set_sync_debug_mode("error" if quiet else "default")
        self.strict = getattr(self, "strict", 0) + quiet

    def on_validation_start(self, trainer, pl_module):
        import torch

        torch.cuda.set_sync_debug_mode("default")

    on_train_end = on_validation_start


@pytest.mark.cuda
@pytest.mark.parametrize("overrides", [["logger=tensorboard", "trainer.enable_progress_bar=true"],
                                       ["logger=csv", "task=classify"]], ids=["lm", "classifier"])
def test_on_a_gpu_no_step_between_logging_steps_syncs_in_a_whole_fit(overrides, tmp_path):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    marks = SyncErrors(Counter())
    try:
        # the timeline off: over this run's ~40 steps its 64 log-spaced readings would take every step
        s = train(run_of([*SMALL, "trainer=gpu", "maps.timeline=false", *overrides], tmp_path), callbacks=[marks])
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert s["status"] == "completed", s.get("error") or s
    assert marks.strict > 10
