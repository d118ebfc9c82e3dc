"""Where a run trains, decided once from the trainer settings and what this machine has: the CPU
or a GPU, and in which precision (bf16 mixed where the GPU has it)."""

from __future__ import annotations

import torch

from attnexp.config import TrainerConfig


def training_on_cpu(trainer: TrainerConfig) -> bool:
    acc = str(trainer.accelerator or "auto")
    return acc == "cpu" or (acc == "auto" and not torch.cuda.is_available())


def precision(trainer: TrainerConfig) -> str | int:
    """trainer.precision, or for `auto`: bf16-mixed on a GPU that has bf16 (16-mixed on one that
    does not), 32-true on the CPU."""
    if trainer.precision not in (None, "auto"):
        return trainer.precision
    gpu = not training_on_cpu(trainer) and torch.cuda.is_available()
    return ("bf16-mixed" if torch.cuda.is_bf16_supported() else "16-mixed") if gpu else "32-true"
