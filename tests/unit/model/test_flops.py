"""The fast path and its measurements: FLOP counts and device peaks for MFU, throughput in every
summary, batch lengths rounded for compiled kernels, torch.compile, and the GPU suite's smoke run
(so it cannot rot between GPU sessions). GPU-only checks carry the `cuda` marker."""

from __future__ import annotations

import pytest
import torch

from attnexp import attention
from attnexp.config import AttentionConfig, ModelConfig
from attnexp.model import Transformer
from attnexp.model.flops import peak_tflops, train_flops_per_position

CUDA = torch.cuda.is_available()
TINY = ["trainer.max_epochs=1", "data.n_sentences=300", "logger=none", "maps.enabled=false", "test=false"]


def test_flops_per_position_by_hand():
    d, h, L, T, V = 64, 4, 2, 32, 100
    model = Transformer(ModelConfig(d_model=d, n_heads=h, n_layers=L, max_len=T), AttentionConfig(), V)
    per_layer = d * 3 * d + d * d + d * 4 * d + 4 * d * d  # QKV, output, the MLP's two matrices
    assert model.matmul_params() == L * per_layer + d * V  # + the LM head (tied, but still a product)
    bidir = 3 * (2 * model.matmul_params() + L * 4 * T * d)
    full, causal_cfg = AttentionConfig(mask="bidirectional"), AttentionConfig(mask="causal")
    assert train_flops_per_position(model.matmul_params(), full, T, d, h, L) == bidir
    causal = 3 * (2 * model.matmul_params() + L * 4 * (T + 1) / 2 * d)  # the half of the scores computed
    assert train_flops_per_position(model.matmul_params(), causal_cfg, T, d, h, L) == causal

    def per_query(name, **kw):  # each variant counts its own attention products
        a = attention.with_defaults(AttentionConfig(name=name, mask="bidirectional", **kw))
        return attention.get(name).flops_per_query(a, 4096 if name in ("sliding_window", "linear") else T, d, h)

    assert per_query("sliding_window", window=128) == 4 * 128 * d
    assert per_query("linear") == 4 * h * (d // h) ** 2  # no T in it
    assert per_query("differential") == 1.5 * per_query("mha")
    assert per_query("mla", rope_dim=8) == 2 * T * (d + 8 * h) + 2 * T * d


@pytest.mark.parametrize("device,precision,want", [
    ("NVIDIA H100 80GB HBM3", "bf16-mixed", (989.4, "H100 dense bf16")),
    ("NVIDIA H100 PCIe", "bf16-mixed", (756.0, "H100 PCIe dense bf16")),
    ("NVIDIA H200", "bf16-mixed", (989.4, "H200 dense bf16")),
    ("NVIDIA A100-SXM4-80GB", "32-true", (156.0, "A100 dense tf32")),
    ("NVIDIA L4", "16-mixed", (121.0, "L4 dense fp16")),
    ("Tesla V100-SXM2-16GB", "bf16-mixed", None),  # no bf16 on a V100
    ("cpu (x86_64, 2 threads)", "32-true", None),
    ("Some Future GPU", "bf16-mixed", None),
])
def test_device_peaks(device, precision, want):
    assert peak_tflops(device, precision) == want
