"""Everything logger-specific, one adapter per logger: what its config needs before the run (a
package, a store checked), the fields a run or a sweep adds to its spec, the command that opens its
dashboard, and how an image, a table, the run's settings with its final metrics and the end of a run
reach TensorBoard, wandb, MLflow and CSV. The rest of attnexp calls these functions with every logger
(or logger spec) and never asks which one it is. Adding a logger is its conf/logger/<name>.yaml and an
adapter registered here for its class name (`@adapter_for("MyLogger")`; CONTRIBUTING.md).

Adapters are found by class name (the spec's `_target_`, the logger object's class and its bases), so
this module imports no Lightning: checking a config does not pay for it. A logger without an adapter
(a callback's own, `logger=` with any Lightning logger) still gets scalars through Lightning's
`log_metrics`; it is only skipped for images, tables and the rest."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
from pathlib import Path
from typing import Any

from attnexp.config import ConfigError, layout, split_override

Logger = Any  # a lightning.pytorch.loggers.Logger (not imported: see above)


class Adapter:
    """What one kind of logger does with what attnexp logs beyond scalars (default: nothing), and with
    its spec (the logger's config node) before the run."""

    needs: tuple[str, str] | None = None  # (the module it imports, attnexp's extra that installs it)

    def check(self, spec: dict) -> None:
        """Its settings checked before the run (a ConfigError in one line)."""

    def run_fields(self, spec: dict, tags: list[str], run_name: str) -> dict:
        """The spec with the run's own fields (its name, its tags)."""
        return spec

    def sweep_fields(self, spec: dict, sweep_dir: str, swept: list[str], values: list[str]) -> dict:
        """The spec with what a sweep adds (`values`: the job's swept settings, key=value)."""
        return spec

    def dashboards(self, spec: dict, out_dir: Path) -> list[str]:
        """The commands that open its dashboard for this run, as a user pastes them."""
        return []

    def config(self, lg: Logger, config: dict) -> None:
        """The whole composed config, as the run starts (Lightning adds the model's settings at fit)."""
        lg.log_hyperparams(config)

    def image(self, lg: Logger, key: str, img, png: bytes, step: int) -> None:
        pass

    def layout(self, lg: Logger, charts: dict) -> None:
        """How the dashboard groups the charts (`charts_layout`), once a run."""

    def table(self, lg: Logger, key: str, columns: list[str], rows: list[list], step: int) -> None:
        pass

    def histogram(self, lg: Logger, key: str, values, step: int) -> None:
        pass

    def final_hparams(self, lg: Logger, params: dict, metrics: dict, step: int) -> None:
        pass

    def link(self, lg: Logger) -> str | None:
        """The address that opens this run's page, where it can only be known once the logger exists."""
        return None

    def finish(self, lg: Logger, completed: bool, run_dir: Path | None = None) -> None:
        pass


LOSS_CURVES = ("train/loss", "val/loss")


def tensorboard_page(port: int = 6006) -> str:
    """TensorBoard's Time Series page with the loss curves pinned above every group. Its groups are
    sorted by tag, so `attn/` (the maps' layer means) comes before `train/` and `val/`, and
    TensorBoard offers no order of one's own (its maintainers point to tag names or the Custom
    Scalars tab, tensorflow/tensorboard#865); what it does read from the page's address is which
    cards are pinned (`pinnedCards`, a JSON list of {plugin, tag})."""
    pins = json.dumps([{"plugin": "scalars", "tag": t} for t in LOSS_CURVES], separators=(",", ":"))
    return f"http://localhost:{port}/?pinnedCards={pins}#timeseries"


class TensorBoard(Adapter):
    def dashboards(self, spec, out_dir):
        folder = Path(str(spec.get("save_dir", out_dir))) / str(spec.get("name") or "")
        return [f"tensorboard --logdir {shlex.quote(str(folder))}", f"open {shlex.quote(tensorboard_page())}"]

    def image(self, lg, key, img, png, step):
        from tensorboard.compat.proto.summary_pb2 import Summary  # hand over our PNG: add_image would re-encode it

        image = Summary.Image(height=img.height, width=img.width, colorspace=3, encoded_image_string=png)
        lg.experiment.file_writer.add_summary(Summary(value=[Summary.Value(tag=key, image=image)]), step)

    def histogram(self, lg, key, values, step):
        lg.experiment.add_histogram(key, values, step)

    def layout(self, lg, charts):  # the Custom Scalars tab
        lg.experiment.add_custom_scalars(charts)

    def final_hparams(self, lg, params, metrics, step):
        # TensorBoard's HPARAMS tab: written after Lightning finalized the logger, so flushed now, or
        # the record waits for the writer's 2-minute timer (or is lost when the process ends first)
        lg.log_hyperparams(params, metrics, step=step)
        lg.experiment.flush()


class Wandb(Adapter):
    def run_fields(self, spec, tags, run_name):  # named after its folder, as MLflow's run and TensorBoard's
        return {**spec, "name": spec.get("name") or run_name, "tags": [*(spec.get("tags") or []), *tags]}

    def sweep_fields(self, spec, sweep_dir, swept, values):
        """The runs of one sweep share a group (the sweep folder) and carry the swept settings as job_type
        and tags, so wandb's grouping and filters follow the sweep."""
        root = Path(sweep_dir)
        return {**spec, "group": f"{root.parent.name}/{root.name}", "job_type": ",".join(swept) or "sweep",
                "tags": [*(spec.get("tags") or []), *values]}

    def dashboards(self, spec, out_dir):
        if not spec.get("offline", True):
            return []
        return [f"wandb sync {shlex.quote(str(Path(str(spec.get('save_dir', out_dir))) / 'wandb'))}/offline-run-*"]

    def image(self, lg, key, img, png, step):
        lg.log_image(key=key, images=[img], step=step)

    def table(self, lg, key, columns, rows, step):
        lg.log_table(key=key, columns=columns, data=rows, step=step)

    def histogram(self, lg, key, values, step):
        # through the logger's own log_metrics, as its images: WandbLogger puts `step` under
        # trainer/global_step and lets wandb count its own step, which an explicit step=... trailed
        # (wandb then dropped every histogram: "less than the current step")
        import wandb

        lg.log_metrics({key: wandb.Histogram(values)}, step=step)

    def finish(self, lg, completed, run_dir=None):
        # A wandb run ends with its job: the next job of a sweep (Hydra's basic launcher runs them in
        # one process) gets a run of its own; a run that did not complete is marked failed.
        from attnexp.compat.lightning import wandb_started

        if wandb_started(lg):
            lg.experiment.finish(exit_code=0 if completed else 1)


class MLflow(Adapter):
    # What a run leaves beside its metrics and params, as artifacts of the MLflow run (the maps folder's
    # viewer and GIFs under maps/): what someone browsing the tracking server opens.
    FILES = (layout.SUMMARY, layout.CONFIG, f"{layout.MAPS}/{layout.VIEWER}", f"{layout.MAPS}/{layout.GIFS}")
    needs = ("mlflow", "mlflow")

    def check(self, spec):
        from attnexp.training.mlflow_store import check_store

        check_store(str(spec.get("tracking_uri") or ""))

    def run_fields(self, spec, tags, run_name):
        """Named after its run folder, each tag a tag of its own; a local SQLite store gets its folder and
        its artifacts beside it (mlartifacts/: a tracking server keeps its own)."""
        from attnexp.config.files import sqlite_file
        from attnexp.training.mlflow_store import create_store

        uri, local = str(spec.get("tracking_uri") or ""), {}
        if (db := sqlite_file(uri)) is not None:
            from lightning.pytorch.utilities import rank_zero_only

            db.parent.mkdir(parents=True, exist_ok=True)
            local = {"artifact_location": spec.get("artifact_location") or str(db.parent.resolve() / "mlartifacts")}
            if not db.exists() and rank_zero_only.rank == 0:  # one creator: DDP's other ranks never log to it
                create_store(db, uri, local["artifact_location"])
        return {**spec, **local, "run_name": spec.get("run_name") or run_name,
                "tags": {**(spec.get("tags") or {}), **{f"tag.{t}": "true" for t in tags}}}

    def dashboards(self, spec, out_dir):
        if not spec.get("tracking_uri"):
            return []
        uri = str(spec["tracking_uri"])
        return [f"mlflow ui --backend-store-uri {shlex.quote(uri)}" if not uri.startswith("http") else f"open {uri}"]

    def config(self, lg, config):
        # The logger's first use runs mlflow.set_tracking_uri, which writes os.environ["MLFLOW_TRACKING_URI"]:
        # the next run of this process (a sweep's next job, a notebook's) would take this run's store for
        # the user's own variable (conf/logger/mlflow.yaml reads it). The user's value is put back.
        before = os.environ.get("MLFLOW_TRACKING_URI")
        try:
            # under config/: an MLflow param cannot change, and the settings Lightning logs at fit are the
            # resolved ones (task.objective=next where the config says auto)
            lg.log_hyperparams({"config": config})
            if lg.experiment is not None and isinstance(lg.experiment_id, str):
                # MLflow 3 opens an experiment of no kind on its GenAI view ("Traces 0 / No data available");
                # this kind opens it on the training runs (its UI reads the tag, as it sets it itself)
                lg.experiment.set_experiment_tag(lg.experiment_id, "mlflow.experimentKind", "custom_model_development")
        finally:
            if before is None:
                os.environ.pop("MLFLOW_TRACKING_URI", None)
            else:
                os.environ["MLFLOW_TRACKING_URI"] = before

    def link(self, lg):
        # MLflow 3.17 opens an experiment on its GenAI view whatever its tag says: this address opens the
        # training runs' table (`mlflow ui` serves a local store on port 5000)
        if not isinstance(lg.experiment_id, str):  # a DDP rank other than 0 holds no run
            return None
        uri = str(lg.experiment.tracking_uri or "")  # MlflowClient.tracking_uri, public
        base = uri.rstrip("/") if uri.startswith("http") else "http://127.0.0.1:5000"
        return f"open '{base}/#/experiments/{lg.experiment_id}?workflowType=machine_learning'"

    def image(self, lg, key, img, png, step):  # an image series: the UI's step slider, as TensorBoard's
        lg.experiment.log_image(lg.run_id, img.convert("RGB"), key=key, step=step)

    def table(self, lg, key, columns, rows, step):
        lg.experiment.log_table(lg.run_id, {c: [r[i] for r in rows] for i, c in enumerate(columns)},
                                artifact_file=f"{key}/step{step:06d}.json")

    def finish(self, lg, completed, run_dir=None):
        if lg.experiment is None or not isinstance(lg.run_id, str):  # a DDP rank other than 0 holds no run
            return
        for pattern in self.FILES if run_dir else ():
            for path in sorted(Path(run_dir).glob(pattern)):
                lg.experiment.log_artifact(lg.run_id, str(path), artifact_path=str(Path(pattern).parent).strip("."))
        if not completed:  # Lightning ends it as FINISHED whatever happened
            lg.experiment.set_terminated(lg.run_id, "FAILED")


class Csv(Adapter):
    def dashboards(self, spec, out_dir):
        folder = Path(str(spec.get("save_dir", out_dir))) / str(spec.get("name") or "")
        return [f"cat {shlex.quote(str(folder))}/metrics.csv"]


# class name (Lightning's, or a user's logger's) -> its adapter
ADAPTERS: dict[str, Adapter] = {"TensorBoardLogger": TensorBoard(), "WandbLogger": Wandb(), "MLFlowLogger": MLflow(),
                                "CSVLogger": Csv()}


def adapter_for(class_name: str):
    """Class decorator: the adapter of the logger class `class_name` (and of its subclasses)."""
    def register(cls: type[Adapter]) -> type[Adapter]:
        ADAPTERS[class_name] = cls()
        return cls
    return register


def adapter(lg: Logger) -> Adapter:
    """The adapter of a logger object: of its class or the nearest base that has one."""
    return next((ADAPTERS[c.__name__] for c in type(lg).__mro__ if c.__name__ in ADAPTERS), Adapter())


def spec_adapter(spec) -> Adapter:
    """The adapter of a logger spec (its `_target_`'s class name)."""
    target = str(spec.get("_target_", "")) if isinstance(spec, dict) else ""
    return ADAPTERS.get(target.rsplit(".", 1)[-1], Adapter())


def log_config(loggers, config: dict) -> None:
    for lg in loggers:
        adapter(lg).config(lg, config)


def charts_layout(logged) -> dict:
    """TensorBoard's Custom Scalars layout: the training curves, each per-head quantity's layer
    means on one chart (every layer a line: heads.quantities), and what matters; a chart of the
    maps only where `logged` (the maps' scalar names) has a line for it."""
    from attnexp.heads import quantities

    per_layer = {label: ["Multiline", [rf"^{quantities.QUANTITIES[name].prefix}/L\d+/{name}$"]]
                 for name, label in quantities.labels("scalars").items()}
    matter = {"layer importance (loss increase, layer silenced)": ["Multiline", [r"^attn/L\d+/layer_importance$"]],
              "heads carrying 90% of the importance": ["Multiline", [r"^attn/heads_90$"]],
              "best induction score": ["Multiline", [r"^attn/induction_best$"]],
              "best alignment": ["Multiline", [r"^align/best$"]]}

    def present(charts: dict) -> dict:
        return {k: v for k, v in charts.items() if any(re.match(v[1][0], name) for name in logged)}

    layout = {"training": {"loss": ["Multiline", [r"^(train/loss_epoch|val/loss)$"]],
                           "accuracy": ["Multiline", [r"^(train/acc|val/acc)$"]],
                           "learning rate": ["Multiline", [r"^lr-"]]},
              "heads, each layer's mean": present(per_layer), "which heads matter": present(matter)}
    return {k: v for k, v in layout.items() if v}


def log_layout(loggers, logged) -> None:
    """Once a run, with the names of the maps' first scalars."""
    charts = None
    for lg in loggers:
        charts = charts or charts_layout(logged)
        adapter(lg).layout(lg, charts)


def log_image(loggers, key: str, img, png: bytes, step: int) -> None:
    for lg in loggers:
        adapter(lg).image(lg, key, img, png, step)


def log_histogram(loggers, key: str, values, step: int) -> None:
    for lg in loggers:
        adapter(lg).histogram(lg, key, values, step)


def log_table(loggers, key: str, columns: list[str], rows: list[list], step: int) -> None:
    for lg in loggers:
        adapter(lg).table(lg, key, columns, rows, step)


def log_final_hparams(loggers, params: dict, metrics: dict, step: int) -> None:
    for lg in loggers:
        adapter(lg).final_hparams(lg, params, metrics, step)


def links(loggers) -> list[str]:
    """The addresses that open each logger's page of this run (summary.json's `dashboards`, the end of a run)."""
    return [x for x in (adapter(lg).link(lg) for lg in loggers) if x]


def finish(loggers, completed: bool, run_dir: Path | None = None) -> None:
    for lg in loggers:
        adapter(lg).finish(lg, completed, run_dir)


def run_fields(spec: dict, tags: list[str], run_name: str) -> dict:
    """A logger's spec with the run's own fields (its adapter's run_fields)."""
    return spec_adapter(spec).run_fields(spec, tags, run_name)


def dashboards(specs: dict, out_dir: Path) -> list[str]:
    """The command that opens each of the run's dashboards, as a user pastes it (end of run, summary.json)."""
    return [c for spec in (specs or {}).values() for c in spec_adapter(spec).dashboards(spec, Path(out_dir))]


def installed_loggers(specs: dict, choice: str | None) -> dict:
    """The logger specs whose package is installed, each checked by its adapter: `logger=many` leaves an
    optional one out with a line, a logger asked for by name needs it (a one-line ConfigError with the
    install command)."""
    import logging

    out = {}
    for name, spec in (specs or {}).items():
        a = spec_adapter(spec)
        module, extra = a.needs or (None, None)
        if module is None or importlib.util.find_spec(module) is not None:
            a.check(spec)
            out[name] = spec
        elif choice == "many":
            logging.getLogger("attnexp").info("logger=many: %s left out (not installed: pip install 'attnexp[%s]')",
                                              name, extra)
        else:
            raise ConfigError(f"logger={name} needs {module}, which is not installed: pip install 'attnexp[{extra}]' "
                              f"(or choose another logger)")
    return out


def sweep_fields(spec: dict, sweep_dir: str | None, swept: list[str], overrides: list[str] | None) -> dict:
    """A logger's hydra.utils.instantiate spec with what a sweep adds (its adapter's sweep_fields: wandb
    groups the runs of one sweep); outside a sweep, unchanged."""
    if not sweep_dir:
        return spec

    values = [o.lstrip("+~") for o in overrides or [] if split_override(o)[0] in swept]
    return spec_adapter(spec).sweep_fields(spec, sweep_dir, swept, values)
