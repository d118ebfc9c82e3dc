"""A test callback for DDP runs (`+callbacks.steps._target_=helpers.ddp_steps.StepsPerRank
+callbacks.steps.out=DIR`): each rank writes, for every training batch, its token count, and at each
logging step its own step loss and the number of targets it averaged over, to DIR/rank<R>.jsonl.
Callbacks run before the module's own on_train_batch_end, so the step's loss is still there."""

from __future__ import annotations

import json
from pathlib import Path

from lightning.pytorch.callbacks import Callback


class StepsPerRank(Callback):
    def __init__(self, out: str):
        self.out = Path(out)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        row = {"step": trainer.global_step, "n_tokens": batch["n_tokens"]}
        every = trainer.log_every_n_steps
        if pl_module._step_loss is not None and every and trainer.global_step % every == 0:
            count = getattr(pl_module, "_step_count", None)
            row.update(loss=float(pl_module._step_loss), count=None if count is None else int(count))
        self.out.mkdir(parents=True, exist_ok=True)
        with open(self.out / f"rank{trainer.global_rank}.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
