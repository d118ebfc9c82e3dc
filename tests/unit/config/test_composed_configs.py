"""Every config file composes the way the CLI composes it, and validates into typed objects."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from attnexp.api import load_run
from attnexp.config import ConfigError
from helpers.runs import compose_cfg, options

GROUPS = ["attention", "model", "data", "task", "trainer", "logger", "experiment", "hparams_search", "debug"]


@pytest.mark.parametrize("group,option", [(g, o) for g in GROUPS for o in options(g)])
def test_every_option_composes_and_validates(group, option, tmp_path):
    overrides = [f"{group}={option}"]
    if group == "trainer" and option == "gpu":
        overrides.append("attention.backend=sdpa")  # composes; training needs a GPU
    cfg = compose_cfg(overrides, tmp_path)
    if group == "experiment" and option == "newsgroups_bert":  # the hub's bert-base-uncased; tests are offline
        with pytest.raises(ConfigError, match=r"hf:bert-base-uncased: no such folder.*give hf:DIR"):
            load_run(cfg)
        return
    if group == "experiment" and option == "newsgroups_minilm" and not Path("../shared/models/all-MiniLM-L6-v2").is_dir():
        # a fresh clone with nothing beside it (issue 50): before, the message told the user to download a
        # file path from the hub
        with pytest.raises(ConfigError, match=r"hf:\.\./shared/models/all-MiniLM-L6-v2: no such folder \(from .*\); give "
                                              r"the folder that holds the model's config.json and weights, hf:DIR"):
            load_run(cfg)
        return
    if group == "trainer" and option in ("gpu", "fsdp") and not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="no CUDA GPU is visible here"):  # composes; refused before training
            load_run(cfg)
        return
    run = load_run(cfg)
    assert run.model.d_model % run.model.n_heads == 0
    assert run.task.objective in ("next", "masked")


def test_groups_exist():
    for g in GROUPS:
        assert options(g), f"conf/{g}/ has no options"


@pytest.mark.parametrize("override,needle", [
    ("model.n_heads=5", "model.d_model=64 is not divisible by model.n_heads=5"),
    ("optim.lr=-0.1", "optim.lr=-0.1 must be positive"),
    ("data.corpus=/no/such/file.txt", "data.corpus='/no/such/file.txt': no such file"),
    ("attention.mask=sideways", "attention.mask='sideways' is not one of"),
    ("attention.backend=flex", "trains only on CUDA"),
    ("attention.window=4", "attention.window only applies to sliding_window"),
    ("task.objective=next,attention.mask=bidirectional", "lets every position see"),
    ("checkpoint.monitor=val/accuracy",
     "checkpoint.monitor='val/accuracy' is not a metric this run logs at validation; choose one of: val/loss"),
    ("checkpoint.monitor=val/f1_macro", "'val/f1_macro' is not a metric this run logs"),  # an lm run has no F1
    ("checkpoint.monitor=train/loss", "'train/loss' is not a metric this run logs"),  # arrives after the checkpoint
    ("checkpoint.monitor=align/best", "'align/best' is not a metric this run logs"),  # only synthetic tasks score heads
    ("checkpoint.mode=maximum", "checkpoint.mode='maximum' is not one of: auto, min, max"),
    ("+checkpoint.every=2", "checkpoint: unknown key(s) every"),
])
def test_bad_values_fail_with_a_message_naming_them(override, needle, tmp_path):
    cfg = compose_cfg(override.split(","), tmp_path)
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        load_run(cfg)


def test_gqa_heads_must_divide():
    with pytest.raises(ConfigError, match="n_kv_heads=3 must divide model.n_heads=4"):
        load_run(compose_cfg(["attention=gqa", "attention.n_kv_heads=3"]))


@pytest.mark.parametrize("overrides,monitor,mode", [
    ([], "val/loss", "min"),
    (["checkpoint.monitor=val/acc"], "val/acc", "max"),
    (["checkpoint.monitor=val/ppl"], "val/ppl", "min"),
    (["checkpoint.monitor=val/acc", "checkpoint.mode=min"], "val/acc", "min"),  # explicit mode wins
    (["experiment=newsgroups"], "val/acc", "max"),
    (["experiment=copy", "checkpoint.monitor=align/best"], "align/best", "max"),
])
def test_checkpoint_mode_follows_the_metric(overrides, monitor, mode, tmp_path):
    run = load_run(compose_cfg(overrides, tmp_path))
    assert (run.checkpoint.monitor, run.checkpoint.mode) == (monitor, mode)
