"""Variants compared at one initialisation: every q/k/v projection starts from N(0, 0.02), as every
other weight (torch_mha's kept nn.MultiheadAttention's xavier_uniform_, 4.4x larger at d=64, and its
atlas row differed for that); attention.qkv_init=xavier gives torch's scheme to any variant with one
packed q/k/v projection, for the ablation."""

from __future__ import annotations

import math

import pytest
import torch

from attnexp import attention
from attnexp.config import AttentionConfig, ConfigError, ModelConfig
from attnexp.model import Transformer
from helpers.variants import EXTRA

M = ModelConfig(d_model=64, n_heads=4, n_layers=1, max_len=32)


def built(name: str, **kw) -> torch.nn.Module:
    torch.manual_seed(0)
    a = attention.validate(AttentionConfig(name=name, backend="eager", **{**EXTRA.get(name, {}), **kw}), M)
    return Transformer(M, a, vocab_size=50).blocks[0].attn


@pytest.mark.parametrize("name", list(attention.registered()))
def test_every_variants_projections_start_from_one_scale(name):
    weights = {n: p for n, p in built(name).named_parameters() if p.dim() == 2}  # dot_product has none
    off = {n: round(p.std().item(), 4) for n, p in weights.items() if not 0.017 < p.std().item() < 0.023}
    assert not off, off


@pytest.mark.parametrize("name", ["mha", "torch_mha", "gqa", "rotary"])
def test_xavier_gives_torchs_scheme_to_a_packed_projection(name):
    layer = built(name, qkv_init="xavier")
    w = layer.qkv_weight()
    assert w.std().item() == pytest.approx(math.sqrt(2 / sum(w.shape)), rel=0.06)  # xavier_uniform's std


def test_xavier_is_refused_where_there_is_no_packed_projection():
    with pytest.raises(ConfigError, match="attention.qkv_init=xavier needs one packed q/k/v projection, which mla"):
        attention.validate(AttentionConfig(name="mla", qkv_init="xavier"), M)
    with pytest.raises(ConfigError, match="attention.qkv_init='uniform' is not one of: normal, xavier"):
        attention.validate(AttentionConfig(qkv_init="uniform"), M)
