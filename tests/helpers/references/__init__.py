"""Transcriptions of the attention code the authors of the 2024-25 variants released, each module
naming the repository, file and commit it follows line by line. Only what cannot run here is
changed (Triton/flash kernels, tensor parallelism, KV caches, einops), and each change is said.
Their code keeps its licences (named in each module); these are test references, not attnexp code.

Several of them upcast to float32 (`softmax(..., dtype=torch.float32)`, `.float()`) for bf16
training; the tests run in float64, where that cast would round *down*, so it is written as an
upcast to at least float32 (`_at_least_fp32`), which is what it does in their setting.
"""

import torch


def _at_least_fp32(t: torch.Tensor) -> torch.dtype:
    return torch.promote_types(t.dtype, torch.float32)
