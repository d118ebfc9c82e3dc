"""A real checkpoint of a tiny run, and copies of it changed as a stranger might (forged), for the
tests of what attnexp does with files it did not write."""

from __future__ import annotations

import pytest

from attnexp.api import train
from helpers.runs import run_of


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A real checkpoint (with its tokenizer) of a tiny run."""
    d = tmp_path_factory.mktemp("maps")
    s = train(run_of(["trainer.max_epochs=1", "data.n_sentences=100", "logger=none", "maps.enabled=false",
                      "trainer.enable_progress_bar=false", "test=false"], d / "run"))
    return d, s["checkpoints"]["last"]


def forged(trained, name: str, change) -> str:
    import torch

    d, ckpt = trained
    data = torch.load(ckpt, weights_only=True)
    change(data)
    path = d / f"{name}.ckpt"
    torch.save(data, path)
    return str(path)


def encoder(data: dict) -> dict:
    return next(v["encoder"] for k, v in data.items() if k.endswith("DataModule"))
