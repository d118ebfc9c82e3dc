"""A test callback that damages a file once a run's fit ends (`+callbacks.damage._target_=helpers.damage.
AppendGarbage +callbacks.damage.path=FILE`): garbage appended to an Optuna journal, as another writer or
a cut copy would leave it; done once (a marker file beside it)."""

from __future__ import annotations

from pathlib import Path

from lightning.pytorch.callbacks import Callback


class AppendGarbage(Callback):
    def __init__(self, path: str):
        self.path = Path(path)

    def on_fit_end(self, trainer, pl_module):
        marker = self.path.with_name(self.path.name + ".damaged")
        if not marker.exists():
            marker.write_text("once\n")
            with open(self.path, "a") as f:
                f.write("garbage, not a journal line\n")
