"""A causal model never depends on anything after position i, the future's *length* included.

The leak tests in test_attention.py perturb future tokens; these change how many there are: for
every registered variant on every backend it runs on, through the layer and through the whole
model, outputs and weights at positions 0..k-1 must be the same whether the sequence is run whole,
cut at k, or padded after k (float64, to ~1e-12)."""

from __future__ import annotations

import pytest
import torch

from attnexp import attention
from attnexp.attention import MaskSpec
from attnexp.config import AttentionConfig, ModelConfig
from attnexp.model import Transformer
from helpers.variants import EXTRA, D, H, build, cases

B, T, K = 2, 16, 9  # whole length, cut/padded at K
exact = dict(atol=1e-12, rtol=1e-12)


def layer_views(mod, x_BTD, need_weights: bool):
    """(whole, cut at K, K real tokens padded to T): each (y, w) of the layer, float64, no grad."""
    valid = torch.arange(T)[None, :] < K
    padded_x = torch.cat([x_BTD[:, :K], torch.randn(B, T - K, D, dtype=x_BTD.dtype) * 3], 1)
    window = mod.cfg.window
    with torch.no_grad():
        return (mod(x_BTD, MaskSpec(True, None, window), need_weights),
                mod(x_BTD[:, :K].contiguous(), MaskSpec(True, None, window), need_weights),
                mod(padded_x, MaskSpec(True, valid.expand(B, T), window), need_weights))


@pytest.mark.parametrize("name,backend", cases())
def test_layer_past_does_not_depend_on_the_future_length(name, backend):
    mod = build(name, backend, "causal").double()
    x = torch.randn(B, T, D, dtype=torch.float64)
    (y_whole, _), (y_cut, _), (y_pad, _) = layer_views(mod, x, need_weights=False)
    torch.testing.assert_close(y_whole[:, :K], y_cut, **exact, msg=f"{name}/{backend}: whole vs cut at {K}")
    torch.testing.assert_close(y_pad[:, :K], y_cut, **exact, msg=f"{name}/{backend}: padded after {K} vs cut")


@pytest.mark.parametrize("name", list(attention.registered()))
def test_layer_weights_of_the_past_do_not_depend_on_the_future_length(name):
    mod = build(name, "eager", "causal").double()
    x = torch.randn(B, T, D, dtype=torch.float64)
    (_, w_whole), (_, w_cut), (_, w_pad) = layer_views(mod, x, need_weights=True)
    torch.testing.assert_close(w_whole[:, :, :K, :K], w_cut, **exact)
    torch.testing.assert_close(w_pad[:, :, :K, :K], w_cut, **exact)
    assert w_whole[:, :, :K, K:].abs().max() == 0 and w_pad[:, :, :K, K:].abs().max() == 0


def tiny_model(name: str, backend: str) -> Transformer:
    torch.manual_seed(0)
    m = ModelConfig(d_model=D, n_heads=H, n_layers=2, max_len=32)
    a = AttentionConfig(name=name, backend=backend, mask="causal", **EXTRA.get(name, {}))
    model = Transformer(m, a, vocab_size=50).double().eval()
    with torch.no_grad():
        for p in model.parameters():  # larger than the default init, so a leak shows above rounding
            p.add_(torch.randn_like(p) * 0.1)
    return model


@pytest.mark.parametrize("name,backend", cases())
def test_model_logits_of_the_past_do_not_depend_on_the_future_length(name, backend):
    model = tiny_model(name, backend)
    ids = torch.randint(1, 50, (B, T))
    padded = torch.cat([ids[:, :K], torch.zeros(B, T - K, dtype=torch.long)], 1)
    valid = (torch.arange(T)[None, :] < K).expand(B, T)
    with torch.no_grad():
        whole = model(ids).logits[:, :K]
        cut = model(ids[:, :K]).logits
        pad = model(padded, valid).logits[:, :K]
    torch.testing.assert_close(whole, cut, **exact, msg=f"{name}/{backend}: whole vs cut")
    torch.testing.assert_close(pad, cut, **exact, msg=f"{name}/{backend}: padded vs cut")
