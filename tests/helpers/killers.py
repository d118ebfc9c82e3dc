"""A callback that kills its own process outright (SIGKILL: no handler, no checkpoint, no summary
update), once, at a chosen moment: how an out-of-memory killer or a lost node ends a run. Given to
a subprocess run as +callbacks.kill._target_=helpers.killers.KillAt (PYTHONPATH holding tests/)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import lightning as L


class KillAt(L.Callback):
    """`at`: "validation_start" (of epoch `epoch`) or "step" (right after optimizer step `step` and
    whatever checkpoint it wrote). `marker`: a file that makes it fire once across resumes."""

    def __init__(self, at: str, marker: str, epoch: int = -1, step: int = -1):
        self.at, self.marker, self.epoch, self.step = at, Path(marker), epoch, step

    def _kill(self):
        if not self.marker.exists():
            self.marker.write_text("killed")
            os.kill(os.getpid(), signal.SIGKILL)

    def on_validation_start(self, trainer, pl_module):
        if self.at == "validation_start" and not trainer.sanity_checking and trainer.current_epoch == self.epoch:
            self._kill()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if self.at == "step" and trainer.global_step == self.step:
            self._kill()


class KillDuringSave(L.Callback):
    """SIGKILL in the middle of the first checkpoint save after optimizer step `step`: torch.save
    has written part of the file when the process dies (`marker`: once across resumes)."""

    def __init__(self, marker: str, step: int):
        self.marker, self.step = Path(marker), step

    def setup(self, trainer, pl_module, stage):
        import torch

        real = torch.save

        def save(obj, f, *args, **kwargs):
            if trainer.global_step >= self.step and not self.marker.exists() and hasattr(f, "write"):
                self.marker.write_text("killed")
                f.write(b"PK\x03\x04 half a checkpoint")
                f.flush()
                os.kill(os.getpid(), signal.SIGKILL)
            return real(obj, f, *args, **kwargs)

        torch.save = save


class FillDiskAt(L.Callback):
    """Fills the filesystem of `path` (a file it writes until no space is left) right after optimizer
    step `step`, mid-epoch: the disk runs full while the run goes on writing."""

    def __init__(self, path: str, step: int):
        self.path, self.step = Path(path), step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == self.step and not self.path.exists():
            with open(self.path, "wb", buffering=0) as f:
                try:
                    while True:
                        f.write(b"\0" * 4096)
                except OSError:
                    pass


class ReadOnlyAt(L.Callback):
    """Mounts a read-only filesystem over the folder `path` right after optimizer step `step` (root
    only): what a folder made unwritable mid-run looks like to the run (EROFS on every write there)."""

    def __init__(self, path: str, step: int):
        self.path, self.step = Path(path), step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == self.step:
            import subprocess

            subprocess.run(["mount", "-t", "tmpfs", "-o", "ro", "tmpfs", str(self.path)], check=True)
