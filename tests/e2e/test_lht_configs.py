"""lightning-hydra-template's tests/test_configs.py and tests/test_datamodules.py, rewritten for
attnexp (ashleve/lightning-hydra-template). LHT builds each node with `hydra.utils.instantiate`;
attnexp builds data, model and trainer through one path, the one `attnexp train` takes
(`load_run(compose(...))` checks the config, `training.fit.prepare` builds the data and the module,
`training.build.trainer` the Trainer with `trainer.precision` resolved); its data and model nodes are
typed settings, not `_target_` nodes. The trainer node is Lightning's own: `instantiate(cfg.trainer)`
gives a Trainer, as LHT's test_train_config and test_eval_config assert (its precision null: Lightning's
default, which attnexp's own path resolves to bf16-mixed on a GPU that has it)."""

from __future__ import annotations

import lightning as L
import pytest
import torch

from attnexp.api import compose, load_run
from attnexp.data import build_datamodule


@pytest.mark.parametrize("overrides", [[], ["experiment=copy"], ["data=synthetic", "data.kind=induction", "attention=rotary"]])
def test_train_config(overrides, tmp_path):
    """Mirrors test_train_config: the composed config has data, model and trainer, and each builds."""
    from attnexp.training import build, fit

    cfg = compose([*overrides, "logger=none", "trainer.max_epochs=1"], tmp_path)
    assert cfg.data and cfg.model and cfg.trainer
    run = load_run(cfg)
    dm, module, resume = fit.prepare(run)
    trainer = build.trainer(run, [], [])
    assert isinstance(dm, L.LightningDataModule) and isinstance(module, L.LightningModule) and resume is None
    assert isinstance(trainer, L.Trainer) and trainer.max_epochs == 1
    assert trainer.precision == ("32-true" if not torch.cuda.is_available() else trainer.precision)  # auto, resolved
    from hydra.core.hydra_config import HydraConfig
    from hydra.utils import instantiate

    HydraConfig().set_config(cfg)
    assert isinstance(instantiate(cfg.trainer), L.Trainer)  # LHT's hydra.utils.instantiate(cfg_train.trainer)


def test_eval_config(tmp_path):
    """Mirrors test_eval_config, with its fixture's compose(config_name="eval", overrides=["ckpt_path=."]):
    conf/eval.yaml composes, holds data, model and trainer, each builds, and the trainer node instantiates.
    Before (issue 68 item 3): there was no eval primary config (MissingConfigException)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.utils import instantiate

    from attnexp.model import Transformer

    cfg = compose(["ckpt_path=.", "logger=none"], tmp_path, config_name="eval")
    assert cfg and cfg.data and cfg.model and cfg.trainer and cfg.ckpt_path == "."
    HydraConfig().set_config(cfg)
    run = load_run(compose(["logger=none"], tmp_path))  # the same groups through attnexp's path
    dm = build_datamodule(run.data, run.task, causal=run.attention.causal, run_dir=str(tmp_path), seed=run.seed)
    dm.setup("fit")
    assert isinstance(dm, L.LightningDataModule)
    assert isinstance(Transformer(run.model, run.attention, dm.vocab_size), torch.nn.Module)
    assert isinstance(instantiate(cfg.trainer), L.Trainer)


@pytest.mark.parametrize("batch_size", [32, 128])
def test_toy_datamodule(batch_size, tmp_path):
    """Mirrors test_mnist_datamodule: nothing before setup, every split after it, the sizes the
    config asks for, and a batch of batch_size rows of token ids inside the vocabulary."""
    run = load_run(compose(["data=toy", f"data.batch_size={batch_size}", "data.n_sentences=2000", "logger=none"], tmp_path))
    dm = build_datamodule(run.data, run.task, causal=run.attention.causal, run_dir=str(tmp_path), seed=run.seed)
    assert not dm.splits
    dm.setup("fit")
    assert set(dm.splits) >= {"train", "val"} and all(dm.splits[k] for k in ("train", "val"))
    # LHT counts 70,000 MNIST images; the toy grammar's 2,000 sentences lose to train only the other
    # copies of a validation sentence (the split keeps validation out of train)
    n_train, n_val = len(dm.splits["train"]), len(dm.splits["val"])
    assert n_val == 200 and 1700 <= n_train <= 1800
    words = {tuple(x["input_ids"]) for x in dm.splits["val"]}
    assert not [x for x in dm.splits["train"] if tuple(x["input_ids"]) in words]
    assert dm.train_dataloader() and dm.val_dataloader() and dm.test_dataloader()
    batch = next(iter(dm.train_dataloader()))
    ids = batch["input_ids"]
    assert ids.shape[0] == batch_size and ids.dtype == torch.long
    assert int(ids.min()) >= 0 and int(ids.max()) < dm.vocab_size
