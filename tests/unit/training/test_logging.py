"""What a run records and says: the block it ends with (epochs counted from 0 everywhere, metrics
named after the split they were measured on), TensorBoard's HPARAMS tab and step-aligned images,
the full config in wandb, early stopping, and only the task settings that applied."""

from __future__ import annotations

import json
import re

from attnexp.api import train
from attnexp.cli import main
from helpers.runs import run_of

QUICK = ["trainer.enable_progress_bar=false", "data.n_sentences=400", "trainer.max_epochs=2", "maps.n_examples=2"]


def test_a_run_ends_with_a_block_and_tensorboard_gets_hparams_and_aligned_images(tmp_path, capsys):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_dir = tmp_path / "run"
    assert main(["train", *QUICK, "logger=tensorboard", f"hydra.run.dir={run_dir}"]) == 0
    out = capsys.readouterr().out
    s = json.loads((run_dir / "summary.json").read_text())
    block = out[out.index("attnexp: run completed"):]
    assert f"attnexp: run completed · {run_dir}" in block
    best = s["metrics"]["best"]  # which epoch was best depends on float rounding (thread count), not on this test
    epoch = int(best["checkpoint"].split("best-epoch")[1][:2])
    assert f"best     val/loss {best['value']:.4f} at epoch {epoch} (checkpoints/best-epoch{epoch:02d}.ckpt)" in block
    # the toy data has no test split: the best checkpoint is scored on validation, and says so
    # (once: before, "best val best_val/acc" said it twice)
    assert "  test     acc " in block and "(no test split: the best checkpoint rescored on validation)" in block
    assert "best_val/" not in block and "test/" not in block and "tokens/s" in block
    assert "maps     maps/viewer.html" in block and set(s["metrics"]["test"]) == {"best_val/acc", "best_val/loss", "best_val/ppl"}
    # one epoch numbering: the best epoch is the history's, the checkpoint's and the block's
    assert best["value"] == next(h["val/loss"] for h in s["metrics"]["history"] if h["epoch"] == epoch)
    # HPARAMS: an hparams record with the settings and the final metrics
    records = []
    for f in (run_dir / "tensorboard").glob("events.out.tfevents*"):
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

        records += [v for e in EventFileLoader(str(f)).Load() for v in e.summary.value
                    if v.metadata.plugin_data.plugin_name == "hparams"]
    assert records, "no hparams records in the event files"
    blob = b"".join(r.metadata.plugin_data.content for r in records)
    for needle in (b"attention.name", b"model.d_model", b"optim.lr", b"seed", b"hp/val/loss", b"hp/best_val/acc"):
        assert needle in blob, needle
    # the maps land on the step of the epoch's validation metrics
    ev = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"images": 0, "scalars": 0, "histograms": 0}).Reload()
    # (and the start's, before training, at step 0: before, the dashboards never showed the initialisation)
    assert [e.step for e in ev.Images("attention_maps/example0")] == [0, *(e.step for e in ev.Scalars("val/loss"))]
    assert any(t.startswith("heads/") for t in ev.Tags()["histograms"])  # every key the maps callback logs arrives
    hparams_yaml = (run_dir / "tensorboard" / "hparams.yaml").read_text()
    assert "seed:" in hparams_yaml and "trainer:" in hparams_yaml and "data:" in hparams_yaml


def test_wandb_run_config_holds_the_whole_config(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    from helpers import wandb_log

    train(run_of([*QUICK, "logger=wandb", "trainer.max_epochs=1"], tmp_path))
    run = wandb_log.summary(next((tmp_path / "wandb").glob("offline-run-*/run-*.wandb")))
    for key in ("data", "trainer", "seed", "optim", "attention", "model", "maps"):
        assert key in run["config"], key
    assert run["config"]["data"]["name"] == "toy" and run["config"]["trainer"]["max_epochs"] == 1
    assert run["exit_code"] == 0  # finished with its job


def test_wandb_gets_every_key_the_maps_callback_logs(tmp_path, monkeypatch, capfd):
    """Issue 68 item 2: the heads/<name> histograms went to wandb with an explicit step= that trailed the
    step WandbLogger lets wandb count ("Tried to log to step 19 that is less than the current step 31 ...
    this data will be ignored", 17 times an epoch): no heads/ key reached the run. Every key the callback
    logs now arrives: histograms, maps, roles and the timeline's scalars."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    from helpers import wandb_log

    train(run_of([*QUICK, "logger=wandb", "task=lm", "attention=causal", "maps.every_n_steps=5"], tmp_path))
    run = wandb_log.summary(next((tmp_path / "wandb").glob("offline-run-*/run-*.wandb")))
    keys = run["history"]
    assert any(k.startswith("heads/") for k in keys), sorted(keys)
    assert {"attention_maps/example0", "timeline/heads_broad"} & keys and any(k.startswith("timeline/") for k in keys)
    assert any(k.startswith("head_") for k in keys) and "val/loss" in keys, sorted(keys)
    assert "less than the current step" not in capfd.readouterr().err


def test_early_stopping_is_recorded(tmp_path):
    s = train(run_of([*QUICK, "trainer.max_epochs=30", "checkpoint.patience=1", "optim.lr=1e-12", "logger=none",
                      "maps.enabled=false", "checkpoint.monitor=val/acc"], tmp_path))
    es = s["early_stopping"]
    assert es["monitor"] == "val/acc" and es["patience"] == 1 and 0 < es["stopped_epoch"] < 29 and s["epochs"] < 30


def test_a_classifier_records_no_language_model_settings(tmp_path):
    s = train(run_of([*QUICK, "task=classify", "logger=none", "trainer.max_epochs=1", "maps.enabled=false"], tmp_path))
    assert s["task"] == {"name": "classify", "pooling": "last"}  # no objective, no mask_prob: they did not apply
    lm = train(run_of([*QUICK, "attention=bidirectional", "logger=none", "trainer.max_epochs=1", "maps.enabled=false"],
                      tmp_path / "lm"))
    assert lm["task"] == {"name": "lm", "objective": "masked", "mask_prob": 0.15}


def test_the_end_block_says_why_a_rescored_best_differs_and_counts_time_from_the_start():
    """A best chosen on limited validation batches and rescored on the whole split differs: said.
    `in all` counts from the command's start (data preparation included): a 20 Newsgroups run that
    took 472 s said 85.7 s in all."""
    from attnexp.results.ending import end_of_run

    s = {"status": "completed", "run_dir": "/r", "metrics": {
        "best": {"monitor": "val/loss", "value": 2.5, "checkpoint": "/r/checkpoints/best-epoch00.ckpt"},
        "history": [{"epoch": 0, "val/loss": 2.5}], "test": {"best_val/acc": 0.3, "best_val/loss": 2.31}},
        "train_time_s": 1.0, "wall_time_s": 472.0, "steps": 3, "epochs": 1, "device": "cpu"}
    block = end_of_run(s)
    assert "val/loss 2.3100 here, 2.5000 when it was chosen: validation was limited then" in block
    assert "(472.0 s in all)" in block


def test_a_log_that_is_not_a_terminal_gets_progress_lines_within_an_epoch(tmp_path, caplog, monkeypatch):
    """Before: one line an epoch (minutes of silence on a slow machine). Every EVERY_S seconds (0
    here) a line with the step of the total, the last logged loss (already on the host: issue 54; a line
    before the first logging step has none), ms/step and the time left."""
    import logging

    from attnexp.api import train
    from attnexp.training.console import EpochLines
    from helpers.runs import run_of

    monkeypatch.setattr(EpochLines, "EVERY_S", 0.0)
    with caplog.at_level(logging.INFO, logger="attnexp"):
        s = train(run_of(["trainer.max_epochs=1", "data.n_sentences=300", "logger=none", "maps.enabled=false",
                          "trainer.enable_progress_bar=false", "test=false", "trainer.log_every_n_steps=2"], tmp_path))
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("step ")]
    assert len(lines) >= s["steps"] - 2, lines
    assert re.fullmatch(r"step \d+ of \d+ · loss [\d.]+ · \d+ ms/step · ETA \d+s", lines[-1]), lines[-1]


def test_extras_print_the_config_and_keep_lightnings_warnings_when_asked(tmp_path, capsys):
    """lightning-hydra-template's extras.print_config and extras.ignore_warnings (the after-the-
    first-run issue, item 5): the composed config printed as the run starts; with
    ignore_warnings=false attnexp drops none of Lightning's warnings."""
    import warnings

    from attnexp.training.build import quiet_lightning

    default = run_of([]).extras
    assert default.ignore_warnings and not default.print_config
    train(run_of(["extras.print_config=true", "trainer.fast_dev_run=true", "logger=none", "maps.enabled=false"], tmp_path))
    assert "attention:\n  name: mha\n" in capsys.readouterr().out
    for ignore in (False, True):
        with warnings.catch_warnings():
            warnings.resetwarnings()
            quiet_lightning(ignore)
            assert bool(warnings.filters) == ignore  # each filter an "ignore" of one of Lightning's messages


def test_a_resumed_runs_end_block_says_which_time_is_which():
    """Before: a resumed run said '100.4 s training (41.9 s in all)': training counts every session,
    'in all' only the command that resumed it."""
    from attnexp.results.ending import end_of_run

    s = {"status": "completed", "run_dir": "/r", "metrics": {"best": None, "history": [], "test": {}},
         "train_time_s": 100.4, "wall_time_s": 41.9, "steps": 30, "epochs": 3, "device": "cpu",
         "resumed_from": ["/r/checkpoints/interrupted.ckpt"]}
    assert "100.4 s training over 2 sessions · this session 41.9 s in all (since the resume)" in end_of_run(s)


def test_the_end_of_a_run_names_only_the_maps_it_wrote(tmp_path, capsys):
    """Issue 50. Before: with maps.animation=false the end of a run still named maps/evolution_ex*.gif,
    which was never written (the block was spelled from the config, not from what the run wrote)."""
    run_dir = tmp_path / "run"
    assert main(["train", *QUICK, "logger=none", "maps.animation=false", f"hydra.run.dir={run_dir}"]) == 0
    block = capsys.readouterr().out
    block = block[block.index("attnexp: run completed"):]
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["attention_maps"]["written"] == ["viewer.html"] and not list((run_dir / "maps").glob("*.gif"))
    assert "maps     maps/viewer.html" in block and ".gif" not in block, block
