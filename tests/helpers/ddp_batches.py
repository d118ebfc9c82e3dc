"""A test callback for DDP runs (`+callbacks.batches._target_=helpers.ddp_batches.BatchesPerRank
+callbacks.batches.out=DIR`): the weights before the first step (rank 0, DIR/init.pt) and each rank's
training batches in order (DIR/rank<R>.pt), so a test can replay the run in one process."""

from __future__ import annotations

from pathlib import Path

import torch
from lightning.pytorch.callbacks import Callback


class BatchesPerRank(Callback):
    def __init__(self, out: str):
        self.out, self.batches = Path(out), []

    def on_train_start(self, trainer, pl_module):
        self.out.mkdir(parents=True, exist_ok=True)
        if trainer.global_rank == 0:
            torch.save({"state": {k: v.detach().clone() for k, v in pl_module.state_dict().items()},
                        "schedule_steps": pl_module.schedule_steps}, self.out / "init.pt")

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.batches.append({k: v.clone() if torch.is_tensor(v) else v for k, v in batch.items()})

    def on_train_end(self, trainer, pl_module):
        torch.save(self.batches, self.out / f"rank{trainer.global_rank}.pt")
