"""Everything logger-specific, one adapter per logger: how an image, a table, the run's settings
with its final metrics and the end of a run reach TensorBoard, wandb, MLflow and CSV. The rest of attnexp
calls these functions with every logger the trainer holds and never asks which one it is.

A logger without an adapter here (a callback's own, `logger=` with any Lightning logger) still gets
scalars through Lightning's `log_metrics`; it is only skipped for images, tables and the rest."""

from __future__ import annotations

import os
from pathlib import Path

from lightning.pytorch.loggers import CSVLogger, Logger, MLFlowLogger, TensorBoardLogger, WandbLogger
from lightning.pytorch.utilities import rank_zero_only

from attnexp.compat.lightning import wandb_started
from attnexp.config import layout


class Adapter:
    """What one kind of logger does with what attnexp logs beyond scalars (default: nothing)."""

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


class TensorBoard(Adapter):
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
    def image(self, lg, key, img, png, step):
        lg.log_image(key=key, images=[img], step=step)

    def table(self, lg, key, columns, rows, step):
        lg.log_table(key=key, columns=columns, data=rows, step=step)

    def histogram(self, lg, key, values, step):
        import wandb

        lg.experiment.log({key: wandb.Histogram(values)}, step=step)

    def finish(self, lg, completed, run_dir=None):
        # A wandb run ends with its job: the next job of a sweep (Hydra's basic launcher runs them in
        # one process) gets a run of its own; a run that did not complete is marked failed.
        if wandb_started(lg):
            lg.experiment.finish(exit_code=0 if completed else 1)


class MLflow(Adapter):
    # What a run leaves beside its metrics and params, as artifacts of the MLflow run (the maps folder's
    # viewer and GIFs under maps/): what someone browsing the tracking server opens.
    FILES = (layout.SUMMARY, layout.CONFIG, f"{layout.MAPS}/{layout.VIEWER}", f"{layout.MAPS}/{layout.GIFS}")

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


ADAPTERS: list[tuple[type[Logger], Adapter]] = [(TensorBoardLogger, TensorBoard()), (WandbLogger, Wandb()),
                                                 (MLFlowLogger, MLflow()), (CSVLogger, Adapter())]


def adapter(lg: Logger) -> Adapter:
    return next((a for cls, a in ADAPTERS if isinstance(lg, cls)), Adapter())


def log_config(loggers, config: dict) -> None:
    for lg in loggers:
        adapter(lg).config(lg, config)


def charts_layout(logged) -> dict:
    """TensorBoard's Custom Scalars layout: the training curves, each per-head quantity's layer
    means on one chart (every layer a line: heads.quantities), and what matters; a chart of the
    maps only where `logged` (the maps' scalar names) has a line for it."""
    import re

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
    """A logger's spec with the run's own fields: a wandb run is named after its run folder and its tags
    gain `tags=[...]` (TensorBoard gets them in its hparams record); an MLflow run is named so too and carries each tag as
    a tag of its own; a local SQLite store gets its folder and its artifacts beside it (mlartifacts/:
    a tracking server keeps its own)."""
    target = str(spec.get("_target_", ""))
    if "Wandb" in target:  # named after its folder, as MLflow's run and TensorBoard's (wandb would draw a random name)
        return {**spec, "name": spec.get("name") or run_name, "tags": [*(spec.get("tags") or []), *tags]}
    if "MLFlow" in target:
        uri, local = str(spec.get("tracking_uri") or ""), {}
        if uri.startswith("sqlite:///"):
            db = Path(uri[len("sqlite:///"):])
            db.parent.mkdir(parents=True, exist_ok=True)
            local = {"artifact_location": spec.get("artifact_location") or str(db.parent.resolve() / "mlartifacts")}
            if not db.exists() and rank_zero_only.rank == 0:  # one creator: DDP's other ranks never log to it
                create_mlflow_store(db, uri, local["artifact_location"])
        return {**spec, **local, "run_name": spec.get("run_name") or run_name,
                "tags": {**(spec.get("tags") or {}), **{f"tag.{t}": "true" for t in tags}}}
    return spec


def create_mlflow_store(db: Path, uri: str, artifacts: str) -> None:
    """A new SQLite store whose Default experiment (id 0, which MLflow creates with every store) keeps
    its artifacts beside attnexp's, `<artifacts>/0`: created by MLflow's client it pointed at
    ./mlruns/0 in whatever folder the first run started from, and anything logged there (a notebook's
    bare mlflow.start_run()) scattered an mlruns/ folder into that working directory. Two jobs of a
    sweep that start together may both create it: the one that loses finds it made and goes on."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    try:
        SqlAlchemyStore(uri, artifacts).engine.dispose()
    except Exception:
        if not db.exists():
            raise


def sweep_fields(spec: dict, sweep_dir: str | None, swept: list[str], overrides: list[str] | None) -> dict:
    """A logger's hydra.utils.instantiate spec with what a sweep adds: for wandb, the runs of one
    sweep share a group (the sweep folder) and carry the swept settings as job_type and tags, so
    wandb's grouping and filters follow the sweep. Other loggers unchanged."""
    if not sweep_dir or "Wandb" not in str(spec.get("_target_", "")):
        return spec
    from attnexp.config import split_override

    values = [o.lstrip("+~") for o in overrides or [] if split_override(o)[0] in swept]
    root = Path(sweep_dir)
    return {**spec, "group": f"{root.parent.name}/{root.name}", "job_type": ",".join(swept) or "sweep",
            "tags": [*(spec.get("tags") or []), *values]}
