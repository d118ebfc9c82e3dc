"""Model FLOPs utilisation: an analytic count of a training step's floating-point work (attention
included, each variant counting its own) against the device's dense peak, looked up by name.

Counting convention (as nanoGPT and PaLM): a multiply-add is 2 FLOPs; a training step is 3x the
forward (the backward costs two forwards); only matrix products count. Causal attention counts
the half of the score matrix it computes; a sliding window its window; linear attention its
(head dim)^2 state update per token. Padding positions count: the device computes them."""

from __future__ import annotations

from attnexp import attention
from attnexp.config import AttentionConfig

# Dense (no 2:4 sparsity) peak TFLOP/s from the vendors' data sheets, by a substring of
# torch.cuda.get_device_name(): bf16 / fp16 tensor cores, tf32 tensor cores, plain fp32.
PEAKS: list[tuple[str, dict[str, float]]] = [
    ("H200", {"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 66.9}),
    ("H100 NVL", {"bf16": 835.0, "fp16": 835.0, "tf32": 417.5, "fp32": 60.0}),
    ("H100 PCIe", {"bf16": 756.0, "fp16": 756.0, "tf32": 378.0, "fp32": 51.2}),
    ("H100", {"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 66.9}),  # SXM
    ("GH200", {"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 66.9}),
    ("A100", {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5}),
    ("L40S", {"bf16": 362.1, "fp16": 362.1, "tf32": 183.0, "fp32": 91.6}),
    ("L4", {"bf16": 121.0, "fp16": 121.0, "tf32": 60.0, "fp32": 30.3}),
    ("A10", {"bf16": 125.0, "fp16": 125.0, "tf32": 62.5, "fp32": 31.2}),
    ("RTX 4090", {"bf16": 165.2, "fp16": 165.2, "tf32": 82.6, "fp32": 82.6}),
    ("RTX 3090", {"bf16": 71.0, "fp16": 71.0, "tf32": 35.6, "fp32": 35.6}),
    ("V100", {"fp16": 125.0, "fp32": 15.7}),
    ("T4", {"fp16": 65.0, "fp32": 8.1}),
]


def peak_tflops(device: str, precision: str) -> tuple[float, str] | None:
    """(peak TFLOP/s, which peak) for the precision a run trains in, or None (a CPU, an unknown
    GPU: MFU is then omitted)."""
    kind = ("bf16" if "bf16" in precision else "fp16" if "16" in precision else "tf32")
    for name, peaks in PEAKS:
        if name.lower() in device.lower():
            if kind in peaks:
                return peaks[kind], f"{name} dense {kind}"
            return None
    return None


def train_flops_per_position(n_matmul_params: int, a: AttentionConfig, T: int, d_model: int, n_heads: int,
                             n_layers: int) -> float:
    """Training FLOPs for one sequence position (forward x 3). `n_matmul_params`: the weights of
    every matrix product a position goes through (projections, MLPs, the output head); attention's
    own products are the variant's (`Attention.flops_per_query`)."""
    per_query = attention.get(a.name).flops_per_query(a, T, d_model, n_heads)
    return 3 * (2 * n_matmul_params + n_layers * per_query)
