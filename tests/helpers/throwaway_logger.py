"""A logger that is not attnexp's, added the way CONTRIBUTING.md says: its class, its adapter
(`@adapter_for`), and a conf/logger/<name>.yaml (the test writes that into a --config-dir)."""

from __future__ import annotations

from pathlib import Path

from lightning.pytorch.loggers import Logger

from attnexp.config import check
from attnexp.training.loggers import Adapter, adapter_for


class ThrowawayLogger(Logger):
    def __init__(self, save_dir: str, loud: bool = False):
        super().__init__()
        self.folder, self.metrics, self.images = save_dir, [], []

    @property
    def name(self):
        return "throwaway"

    @property
    def version(self):
        return 0

    def log_hyperparams(self, params, *args, **kwargs):
        pass

    def log_metrics(self, metrics, step=None):
        self.metrics.append((step, dict(metrics)))


@adapter_for("ThrowawayLogger")
class Throwaway(Adapter):
    def check(self, spec):
        check(not spec.get("loud"), "logger.throwaway.loud=true: the throwaway logger is quiet; set it to false")

    def dashboards(self, spec, out_dir):
        return [f"ls {Path(str(spec.get('save_dir', out_dir)))}"]

    def image(self, lg, key, img, png, step):
        lg.images.append((key, step, len(png)))
