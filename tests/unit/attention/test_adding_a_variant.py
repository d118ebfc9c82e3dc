"""A new variant is one file (and one yaml): written in a temporary module and imported, with no
other edit it is listed by `attnexp variants`, counted by the FLOP model, held to by the checkpoint
check, and run through the registry's property tests' first check."""

from __future__ import annotations

import pytest
import torch

from attnexp import attention
from attnexp.attention import MaskSpec, registry
from attnexp.config import AttentionConfig, ModelConfig
from attnexp.model import Transformer, checkpoints
from attnexp.model.flops import train_flops_per_position
from helpers.throwaway import imported

VARIANT = '''
from attnexp.attention.registry import register
from attnexp.attention.variants.mha import MultiHead


@register
class Throwaway(MultiHead):
    """Multi-head attention over a sliding window whose FLOPs are its own (a test's variant)."""

    name = "throwaway_test_variant"
    summary = "a variant defined by a test, in a module of its own"
    backends = ("eager", "sdpa")
    options = {"window": 3}

    @classmethod
    def flops_per_query(cls, a, T, d_model, n_heads):
        return 7.0 * a.window
'''


@pytest.fixture
def throwaway(tmp_path):
    registry.registered()  # every built-in variant in first: the registry is restored to them afterwards
    with imported(tmp_path, "throwaway_variant", VARIANT, registry.REGISTRY) as module:
        yield module.Throwaway


def test_a_variant_in_a_module_of_its_own_is_found_everywhere(throwaway, capsys):
    from attnexp.cli import main

    assert main(["variants"]) == 0
    assert "without a conf/attention option (select with attention.name=...): throwaway_test_variant" in capsys.readouterr().out
    a = attention.validate(AttentionConfig(name="throwaway_test_variant", backend="sdpa"), ModelConfig())
    assert a.window == 3  # its option's default
    assert train_flops_per_position(0, a, 64, 64, 4, n_layers=2) == 3 * 2 * 7.0 * 3  # its own FLOP count

    m = ModelConfig(d_model=32, n_heads=4, n_layers=1)
    model = Transformer(m, a, vocab_size=20)
    y = model(torch.randint(0, 20, (2, 9))).logits
    assert y.shape == (2, 9, 20)
    ckpt = {"hyper_parameters": {"model": vars(m), "attention": vars(a), "task": {"name": "lm"}}}
    other = {**vars(a), "window": 5}
    said = checkpoints.mismatch(ckpt, vars(m), other, {"name": "lm"}, "resume", "x.ckpt")
    assert said and "attention.window=3 (this run: 5)" in said  # its option is part of what the model is
    assert checkpoints.mismatch(ckpt, vars(m), vars(a), {"name": "lm"}, "resume", "x.ckpt") is None
    x = torch.randn(2, 9, 32)
    layer = attention.build(32, 4, a, m=m).eval()
    _, w = layer(x, MaskSpec(causal=True, window=a.window), need_weights=True)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 9))
