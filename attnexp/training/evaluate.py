"""`evaluate(ckpt, split)`: a checkpoint's metrics on a split of the data it was trained on (as
lightning-hydra-template's eval.py), in a folder of its own with a summary.json (kind `eval`) and
the maps of the split's first examples. The data is rebuilt from what the checkpoint records of
it (data_identity); `data.*` overrides may change it where the tokenizer stays the checkpoint's."""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import MISSING, fields
from pathlib import Path

import torch

from attnexp.config import ConfigError, MapsConfig, TaskConfig, check, from_dict, layout, split_override
from attnexp.config.checks import unwritable
from attnexp.config.data import DATA_SETS
from attnexp.config.files import FileRefused
from attnexp.config.paths import whole
from attnexp.model import checkpoints
from attnexp.results import summary
from attnexp.results.summary import Status

SPLITS = ("test", "val", "train")


# What a checkpoint records of where its data was read from (attnexp.data.base.LOCATION): a file, a folder
# or a hub name is read only when the user names it again; `source` picks among attnexp's recipes, and the
# cache is this machine's (a stranger's file must never choose what attnexp reads).
NAMED_BY_THE_USER = ("path", "hub_name", "corpus", "tokenizer")


def data_config(ckpt: dict, path: Path, overrides: list[str], task: TaskConfig):
    """The checkpoint's data config (its recorded settings, not its files) with `data.KEY=VALUE`
    overrides, validated as a run's."""
    import yaml

    from attnexp.data.base import LOCATION
    from attnexp.data.configs import load_data_config

    ident = ckpt.get("data_identity")
    if not isinstance(ident, dict) or not isinstance(ident.get("settings"), dict):
        raise ConfigError(f"ckpt={str(path)!r} does not record its data (a checkpoint from before attnexp recorded "
                          f"data_identity); evaluate it by training with resume= and test=true instead")
    given = {}
    for o in overrides:
        key, value = split_override(o)
        check(key.startswith("data.") and "." not in key[5:],
              f"eval takes data.KEY=VALUE overrides only (the model is the checkpoint's), not {o!r}")
        given[key[5:]] = yaml.safe_load(value) if value else value
    raw = {k: v for k, v in ident["settings"].items() if k not in LOCATION}
    location = ident.get("location") if isinstance(ident.get("location"), dict) else {}
    if "source" in location:
        raw["source"] = location["source"]
    unnamed = [k for k in NAMED_BY_THE_USER if k not in given and location.get(k) not in (None, default_of(raw, k))]
    check(not unnamed, f"ckpt={str(path)!r} was trained on data.{unnamed[0]}={str(location.get(unnamed[0]))[:120]!r}; "
                       f"a checkpoint never chooses a file attnexp reads: give it again on the command line "
                       f"(eval ckpt=... data.{unnamed[0]}=PATH) to read it" if unnamed else "")
    return load_data_config({**raw, **given}, task)


def default_of(raw: dict, key: str):
    """A data set's default for `key` (its config class's), or None."""
    cls = DATA_SETS.get(raw.get("name"))
    f = next((f for f in fields(cls) if f.name == key), None) if cls else None
    if f is None:
        return None
    return f.default if f.default is not MISSING else (f.default_factory() if f.default_factory is not MISSING else None)


def evaluate(ckpt_path: str | Path, split: str | None = None, overrides: list[str] = (), out: str | Path | None = None) -> dict:
    """The metrics of `ckpt_path` on `split` (None: the test split, or validation where the data has
    none, as `train test=true` rescores); returns the summary it writes into its folder."""
    import lightning as L

    from attnexp.data import build_datamodule
    from attnexp.data.base import identity_mismatch
    from attnexp.maps import draw
    from attnexp.training.build import quiet_lightning
    from attnexp.training.module import AttnexpModule

    quiet_lightning()
    logging.getLogger("lightning.pytorch.utilities.rank_zero").setLevel(logging.WARNING)  # "GPU available: False"...
    t0, path = time.time(), Path(ckpt_path)
    check(split is None or split in SPLITS, f"split={split!r} is not one of: {', '.join(SPLITS)}")
    problem = unwritable(Path(out) if out else path.parent.parent / layout.EVAL, "out", "the evaluation's folder")
    check(problem is None, problem or "")  # before the evaluation, not after it
    ckpt = checkpoints.load(ckpt_path, "ckpt")
    model, hp = checkpoints.model_from_checkpoint(ckpt, path)  # sizes checked before anything is built
    task = from_dict(TaskConfig, hp["task"], "task")
    cfg = data_config(ckpt, path, list(overrides), task)
    seed = (ckpt.get("data_identity") or {}).get("seed", 0)  # the run's: a masked LM's masks repeat its validation's
    check(isinstance(seed, int) and 0 <= seed < 2**63, f"ckpt={str(path)!r} records a data seed that is not one "
                                                         f"({str(seed)[:40]!r}); it is not a whole attnexp checkpoint")
    dm = build_datamodule(cfg, task, causal=model.a.causal, seed=seed)
    dm.setup("fit")
    if split is None:  # as train's test=true: the test split, else validation, said in the record
        split = "test" if "test" in dm.splits else "val"
    check(split in dm.splits, f"split={split}: data={cfg.name} has no {split} split (it has "
                              f"{', '.join(dm.splits)}); give split=val")
    saved = ckpt.get("data_identity") or {}
    if saved.get("tokenizer_sha256") != dm.identity()["tokenizer_sha256"]:
        raise ConfigError(f"ckpt={str(path)!r}: these data settings give another tokenizer than the one it was trained "
                          f"with ({identity_mismatch(saved, dm.identity())}); keep the settings that choose the vocabulary")
    module = AttnexpModule(**{k: hp[k] for k in ("model", "attention", "task", "optim", "vocab_size", "num_classes")})
    checkpoints.check_shapes(ckpt, module.state_dict(), "ckpt", path)
    module.load_state_dict(ckpt["state_dict"])
    module.stage_prefix["test"] = split
    dm.eval_split = split
    kept = Kept()
    trainer = L.Trainer(accelerator="auto", devices=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[kept])
    metrics = (trainer.test(module, datamodule=dm, verbose=False) or [{}])[0]
    noted = noted_in_run(path) if split == "test" else None
    predicted = kept.in_split_order(dm)
    existed = bool(out) and Path(out).is_dir()
    folder = draw.out_folder(str(out) if out else None, path.parent.parent / layout.EVAL / f"{path.stem}_{split}")
    try:
        return write_evaluation(folder, path, split, metrics, cfg, dm, task, model, t0, predicted, noted)
    except BaseException:  # a stop signal or a failure while writing: no half folder (an empty out= stays)
        for p in sorted(folder.rglob("*"), reverse=True) if existed else ():
            p.rmdir() if p.is_dir() else p.unlink(missing_ok=True)
        if not existed:
            shutil.rmtree(folder, ignore_errors=True)
        raise


def noted_in_run(ckpt: Path) -> str | None:
    """The read of a run's test split noted in the run's folder (results.test_reads): its path, or
    None where the checkpoint is not in a run folder or that folder cannot be written (said, once)."""
    from attnexp.results import test_reads

    run = test_reads.run_of(ckpt)
    try:
        if run is not None:
            test_reads.note(run, "eval split=test", ckpt)
    except (OSError, FileRefused) as e:
        logging.getLogger("attnexp").warning("the test read is not noted in %s (%s: %s)", run, layout.TEST_READS,
                                             getattr(e, "strerror", None) or e)
        return None
    return str(run) if run else None


def Kept():
    """A callback keeping a classifier's predictions and labels of every test batch on the device (no
    host read a batch), then in the split's order: what a paired test of two models needs."""
    import lightning as L

    class KeptPredictions(L.Callback):
        def __init__(self):
            self.batches = []

        def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
            if outputs is not None:  # test_step's (predictions, labels), a classifier's
                self.batches.append(outputs)

        def in_split_order(self, dm) -> dict | None:
            """{"label": [...], "pred": [...]}, example i of the split at i; None for a language model."""
            if not self.batches:
                return None
            order = [i for _, i in (x for b in dm.test_dataloader().batch_sampler for x in b)]
            pred, label = (torch.cat([b[k] for b in self.batches]).cpu().tolist() for k in (0, 1))
            if len(order) != len(pred):
                return None
            out = {"label": [0] * len(order), "pred": [0] * len(order)}
            for k, i in enumerate(order):
                out["label"][i], out["pred"][i] = int(label[k]), int(pred[k])
            return out

    return KeptPredictions()


def write_evaluation(folder: Path, path: Path, split: str, metrics: dict, cfg, dm, task, model, t0: float,
                     predicted: dict | None = None, noted: str | None = None) -> dict:
    """The evaluation's folder: its summary.json (kind `eval`, written last; `test_read_noted_in`: the
    run folder whose test_reads.jsonl has this read), a classifier's predictions.json and the split's maps."""
    record = {**summary.header(Status.COMPLETED, None, folder), "kind": "eval", "checkpoint": str(path.resolve()),
              "split": split, "metrics": {"final": {}, "best": None, "history": [],
                                          "test": {k: round(float(v), 6) for k, v in sorted(metrics.items())}},
              "data": {"name": cfg.name, f"n_{split}": len(dm.splits[split]), "identity": dm.identity()},
              "task": summary.task_record(task), "wall_time_s": round(time.time() - t0, 2), "versions": summary.versions(),
              **({"test_read_noted_in": noted} if noted else {})}
    if predicted is not None:
        with whole(folder / layout.PREDICTIONS) as tmp:
            tmp.write_text(json.dumps({"split": split, **predicted}, separators=(",", ":")))
        record["predictions"] = layout.PREDICTIONS
    draw_split_maps(model, dm, split, folder)
    summary.write(folder / summary.NAME, record)
    return record


def draw_split_maps(model, dm, split: str, folder: Path) -> None:
    """The maps of the split's first examples (as a run's snapshots draw the validation probe)."""
    from attnexp.heads.probe import probe_from
    from attnexp.maps import draw

    view = MapsConfig()
    probe = probe_from(dm, [], view.n_examples, split)
    src = draw.Source(model, probe, dm.pad_id, f"{split} examples", 0, folder,
                      first_word_id=getattr(dm, "first_word_id", None), class_names=dm.class_names)
    draw.draw(src, folder, view)
