"""Model FLOPs utilisation: an analytic count of a training step's floating-point work (attention
included, per variant) against the device's dense peak, looked up by name. No torch import.

Counting convention (as nanoGPT and PaLM): a multiply-add is 2 FLOPs; a training step is 3x the
forward (the backward costs two forwards); only matrix products count. Causal attention counts
the half of the score matrix it computes; a sliding window its window; linear attention its
(head dim)^2 state update per token. Padding positions count: the device computes them."""

from __future__ import annotations

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


def attention_flops_per_query(variant: str, causal: bool, T: int, d_model: int, n_heads: int,
                              window: int | None = None, rope_dim: int | None = None) -> float:
    """Forward FLOPs of the score and weighted-sum products for one query position, all heads."""
    d_head = d_model // n_heads
    if variant == "linear":  # phi(k) v^T into a (d_head x d_head) state, then phi(q) against it: per head
        return 2 * 2 * n_heads * d_head * d_head
    keys = min(window, T) if window else T
    if causal:
        keys = (keys + 1) / 2  # on average over the queries of a sequence
    if variant == "differential":  # two maps of half-width q·k, each times the full-width v
        return 2 * keys * d_model + 2 * 2 * keys * d_model
    if variant == "mla":  # q·k over the content and the decoupled RoPE part, weights times v
        return 2 * keys * n_heads * (d_head + (rope_dim or 0)) + 2 * keys * d_model
    return 2 * 2 * keys * d_model  # q·k for every key, then the weights times v


def train_flops_per_position(n_matmul_params: int, variant: str, causal: bool, T: int, d_model: int, n_heads: int,
                             n_layers: int, window: int | None = None, rope_dim: int | None = None) -> float:
    """Training FLOPs for one sequence position (forward x 3). `n_matmul_params`: the weights of
    every matrix product a position goes through (projections, MLPs, the output head)."""
    forward = 2 * n_matmul_params + n_layers * attention_flops_per_query(variant, causal, T, d_model, n_heads, window, rope_dim)
    return 3 * forward
