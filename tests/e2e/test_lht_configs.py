"""lightning-hydra-template's tests/test_configs.py and tests/test_datamodules.py, rewritten for
attnexp (ashleve/lightning-hydra-template). LHT builds each node with `hydra.utils.instantiate`;
attnexp builds data, model and trainer through one path, the one `attnexp train` takes
(`load_run(compose(...))` checks the config, `training.fit.prepare` builds the data and the module,
`training.build.trainer` the Trainer with `trainer.precision=auto` resolved), so a bare
`instantiate(cfg.trainer)` is not how a node is built (docs/configuration.md)."""

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


def test_a_bare_instantiate_of_the_trainer_node_is_refused_by_lightning_as_the_docs_say(tmp_path):
    """The one node LHT instantiates that attnexp resolves first: trainer.precision=auto."""
    from hydra.utils import instantiate

    cfg = compose(["logger=none"], tmp_path)
    with pytest.raises(Exception, match="[Pp]recision"):
        instantiate(cfg.trainer)


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
