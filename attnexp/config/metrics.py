"""Metric names and which way is better: the one place the module, the checkpoint callback, the
Optuna sweeper, `compare` and the report take them from."""

from __future__ import annotations

ALIGN_BEST = "align/best"  # the best head's alignment score where the data knows the right attention (map callback)
LOWER_IS_BETTER = ("loss", "ppl", "loss_epoch")


def stage_metrics(task_name: str) -> tuple[str, ...]:
    """The metrics a stage logs as `<stage>/<name>`."""
    return ("loss", "acc", "f1_macro") if task_name == "classify" else ("loss", "acc", "ppl")


def monitored_metrics(task_name: str, aligned: bool, maps_enabled: bool) -> list[str]:
    """What a run logs at the end of every validation, so `checkpoint.monitor` can be checked up front
    (train/* epoch values arrive after the checkpoint is taken, so they are not offered). `aligned`:
    the data knows where each answer's attention must go (synthetic tasks, the toy agreement task)."""
    names = [f"val/{m}" for m in stage_metrics(task_name)]
    if aligned and maps_enabled:
        names.append(ALIGN_BEST)
    return names


def higher_is_better(metric: str) -> bool:
    """acc, f1_macro, align/best: higher; loss, ppl: lower (checkpoint.mode=auto, `attnexp compare`)."""
    return metric.rsplit("/", 1)[-1] not in LOWER_IS_BETTER
