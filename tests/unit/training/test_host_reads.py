"""No training step waits for the host: a whole `fit` through the real Trainer, with the default
settings (a logger and the maps on, the progress bar on and off), a language model and a classifier,
counting every call that would make a GPU's host wait for the device. Between logging steps there
is none; a logging step reads what it logs at most once. Before: the default run read 1.17 times a
step (train/loss on the progress bar was converted to a number every step), 2.15 in a terminal, a
classifier 1 more (torchmetrics' bincount), and the CPU path read every step's loss (float(loss),
a branch the GPU never took)."""

from __future__ import annotations

import pytest

from attnexp.api import train
from helpers.host_reads import Counter, DispatchReads, FunctionReads, StepMarks
from helpers.runs import run_of

SMALL = ["data.n_sentences=600", "trainer.max_epochs=2", "trainer.log_every_n_steps=5", "maps.n_examples=2",
         "maps.animation=false", "test=false"]


@pytest.mark.parametrize("overrides", [
    ["logger=tensorboard", "trainer.enable_progress_bar=false"],
    ["logger=tensorboard", "trainer.enable_progress_bar=true"],
    ["logger=csv", "task=classify", "trainer.enable_progress_bar=true"],
    ["logger=none", "maps.enabled=false", "trainer.enable_progress_bar=false"],
    ["logger=tensorboard", "trainer.enable_progress_bar=true", "+terminal"],
], ids=["tensorboard", "tensorboard-progress-bar", "classifier", "lean", "progress-bar-in-a-terminal"])
def test_no_training_step_between_logging_steps_reads_the_device(overrides, tmp_path, monkeypatch):
    if "+terminal" in overrides:  # Lightning's TQDM bar, as a terminal gets it
        from attnexp.training import build

        monkeypatch.setattr(build, "interactive", lambda: True)
        overrides = [o for o in overrides if o != "+terminal"]
    c = Counter()
    marks = StepMarks(c)
    with FunctionReads(c), DispatchReads(c):
        s = train(run_of([*SMALL, *overrides], tmp_path), callbacks=[marks])
    assert s["status"] == "completed"
    assert len(marks.steps) > 10 and marks.logging_steps
    if "maps.enabled=false" not in overrides:  # the timeline's light readings: a few tens, dense early, no more
        assert 0 < len(marks.reading_steps) <= 64 and min(marks.reading_steps) == 0, sorted(marks.reading_steps)
    between = marks.between_logging_steps()
    assert not between, {k: v for k, v in list(between.items())[:3]}
    heavy = {k: v for k, v in marks.at_logging_steps().items() if len(v) > 1}
    assert not heavy, {k: v for k, v in list(heavy.items())[:3]}


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
