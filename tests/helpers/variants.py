"""Helpers shared by the attention tests: build any registered variant, and recompute its output
from the weights it returned (output == weights @ V, through its own projections)."""

from __future__ import annotations

import torch

from attnexp import attention
from attnexp.attention import MaskSpec
from attnexp.attention.variants.dot_product import DotProduct
from attnexp.attention.variants.mha import MultiHead
from attnexp.attention.variants.multi_head_list import MultiHeadList
from attnexp.attention.variants.single_head import SingleHead
from attnexp.attention.variants.torch_mha import TorchMHA
from attnexp.config import AttentionConfig, ModelConfig

D, H, B, T = 32, 4, 3, 12
MODEL = ModelConfig(d_model=D, n_heads=H, max_len=64)  # fills the options whose default depends on the model
EXTRA = {"sliding_window": {"window": 4}, "gqa": {"n_kv_heads": 2}}  # options a variant cannot run without


def cfg(name: str, backend: str = "eager", mask: str = "causal", **kw) -> AttentionConfig:
    return AttentionConfig(name=name, backend=backend, mask=mask, **{**EXTRA.get(name, {}), **kw})


def build(name: str, backend: str = "eager", mask: str = "causal", seed: int = 0, **kw):
    torch.manual_seed(seed)
    mod = attention.build(D, H, cfg(name, backend, mask, **kw), m=MODEL).eval()
    for p in mod.parameters():  # random biases too, so a dropped bias term would show
        torch.nn.init.normal_(p, std=0.3)
    return mod


def spec(mod, mask: str, valid_BT=None) -> MaskSpec:
    return MaskSpec(causal=mask == "causal", key_valid_BT=valid_BT, window=mod.cfg.window)


def pad_valid(lengths=(T, 7, 3)) -> torch.Tensor:
    return torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]


def cases():
    """(variant, backend) for every backend each registered variant declares."""
    return [(n, b) for n, c in attention.registered().items() for b in c.backends]


def output_from_weights(mod, x_BTD, w_BHTT):
    """y recomputed as weights @ V through the variant's own value and output projections."""
    if isinstance(mod, DotProduct):
        return w_BHTT[:, 0] @ x_BTD
    if isinstance(mod, SingleHead):
        return w_BHTT[:, 0] @ mod.head.v(x_BTD)
    if isinstance(mod, MultiHeadList):
        return mod.out(torch.cat([w_BHTT[:, i] @ h.v(x_BTD) for i, h in enumerate(mod.heads)], -1))
    if isinstance(mod, TorchMHA):
        m = mod.mha
        v = x_BTD @ m.in_proj_weight[2 * D:].T + m.in_proj_bias[2 * D:]
        v_BHTD = v.view(x_BTD.shape[0], -1, H, D // H).transpose(1, 2)
        return m.out_proj((w_BHTT @ v_BHTD).transpose(1, 2).reshape(x_BTD.shape))
    if isinstance(mod, MultiHead):  # the fused family: its own V and what follows the heads
        v_BGTD = mod.project(x_BTD)[2]
        return mod.finish(w_BHTT @ v_BGTD.repeat_interleave(H // v_BGTD.shape[1], 1), x_BTD)
    raise AssertionError(f"add a case for {type(mod).__name__} to output_from_weights")
