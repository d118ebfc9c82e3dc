"""Every registered variant (attnexp's and a plugin's) through every command a user reaches: a few
training steps -> last.ckpt -> resume, `eval`, `maps`, `sample` (causal LMs), `attnexp.api.load(ckpt)
.attention(text)` and `compare`, causal and bidirectional (issue 50). Before: no ALiBi checkpoint
could be read back by eval, maps, sample or api.load ("describes a model of 806,032 parameters but
holds tensors for 806,016": the size check counted ALiBi's non-persistent slopes buffer), and no
test read any variant's checkpoint back. One trained checkpoint a variant and mask is shared by the
commands; the sizes are tiny so the whole walk stays in the default set."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from attnexp.api import load, train
from attnexp.attention import registered
from attnexp.cli import main
from helpers import throwaway
from helpers.runs import run_of
from helpers.tests_data import halved_variant
from helpers.variants import EXTRA

PLUGIN = halved_variant("throwaway_walked", "queries halved (a plugin's variant, walked through every command)")
TINY = ["model=tiny", "model.d_model=16", "model.n_heads=2", "model.n_layers=1", "data.n_sentences=60",
        "data.batch_size=16", "logger=none", "maps.enabled=false", "trainer.enable_progress_bar=false",
        "trainer.enable_model_summary=false", "test=false", "threads=1"]
TEXT = "the dogs near the cat run ."
ONE_HEAD = ("dot_product", "single_head")  # one head by definition, whatever model.n_heads says


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    from attnexp.attention.registry import REGISTRY

    registered()
    with throwaway.imported(tmp_path_factory.mktemp("plugin"), "throwaway_walked", PLUGIN, REGISTRY):
        yield "throwaway_walked"


def variants() -> list[str]:
    return [*registered(), "throwaway_walked"]


def settings(name: str, mask: str) -> list[str]:
    extra = [f"attention.{k}={v}" for k, v in EXTRA.get(name, {}).items()]
    backend = registered()[name].backends[0]  # the variant's first backend (attention=causal's sdpa is not linear's)
    return [f"attention.name={name}", f"attention.mask={mask}", f"attention.backend={backend}", *extra]


@pytest.mark.parametrize("mask", ["causal", "bidirectional"])
@pytest.mark.parametrize("name", variants())
def test_a_variant_through_every_command(name, mask, plugin, tmp_path, capsys):
    if name not in registered():
        pytest.skip(f"{name} is not registered")
    base = [*settings(name, mask), *TINY]
    first = train(run_of([*base, "trainer.max_epochs=1"], tmp_path / "run"))
    assert first["status"] == "completed", first.get("error")
    ckpt = first["checkpoints"]["last"]
    assert Path(ckpt).is_file()

    again = train(run_of([*base, "trainer.max_epochs=2", f"resume={ckpt}"], tmp_path / "resumed"))
    assert again["status"] == "completed" and again["steps"] > first["steps"], again.get("error")

    # batched as in training: a masked LM's masks are a function of the batch's examples
    assert main(["eval", f"ckpt={ckpt}", "split=val", "data.batch_size=16", f"out={tmp_path / 'eval'}"]) == 0, \
        capsys.readouterr().err
    evaluated = json.loads((tmp_path / "eval" / "summary.json").read_text())["metrics"]["test"]
    trained = first["metrics"]["history"][-1]
    assert evaluated["val/loss"] == pytest.approx(trained["val/loss"], abs=1e-4)  # the same weights on the same split

    loaded = load(ckpt)
    tokens, maps = loaded.attention(TEXT)
    n_layers, n_heads = loaded.model.m.n_layers, loaded.model.m.n_heads
    heads = 1 if name in ONE_HEAD else n_heads
    assert maps.shape == (n_layers, heads, len(tokens), len(tokens)) and np.isfinite(maps).all()
    rows, promised = maps.sum(-1), registered()[name].rows  # what each variant's rows sum to (`attnexp variants`)
    assert {"1": lambda: np.allclose(rows, 1, atol=1e-4), "at most 1": lambda: (rows <= 1 + 1e-4).all()}.get(
        promised, lambda: True)(), (promised, rows.min(), rows.max())
    if mask == "causal":
        assert np.allclose(np.triu(maps, 1), 0)  # never the future

    assert main(["maps", f"ckpt={ckpt}", f"text={TEXT}", f"out={tmp_path / 'maps'}"]) == 0, capsys.readouterr().err
    assert list((tmp_path / "maps").glob("*.png"))
    if mask == "causal":
        assert main(["sample", f"ckpt={ckpt}", "prompt=the dog", "max_new_tokens=5"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "run"), str(tmp_path / "resumed")]) == 0
    assert capsys.readouterr().out.count("| completed |") == 2  # both runs side by side
