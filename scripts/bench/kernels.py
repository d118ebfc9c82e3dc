#!/usr/bin/env python
"""Attention kernels, forward + backward: every softmax variant that runs on sdpa or flex x backend
(eager, sdpa, flex: compiled on CUDA) x sequence length x head dim x mask, on one device, next to a
bare `F.scaled_dot_product_attention` call on the same q, k, v: what attnexp's kernel path
(`attention.kernels.attend`: the mask, the score bias, the dispatch) costs over the kernel itself.

    python scripts/bench/kernels.py                          # CUDA: bf16, T 128..8192, head dim 64 and 128
    python scripts/bench/kernels.py --device cpu             # CPU: fp32, T 128..1024, head dim 64
    python scripts/bench/kernels.py --smoke                  # seconds: the tests run this

Per row: median fwd+bwd time, TFLOP/s of the attention products (FlashAttention's count: forward
4·B·H·T²·D, halved when causal; forward + backward 3.5x the forward, the backward recomputing the
weights), its share of the device's dense peak, peak memory, and the ratio to the bare call. A row
that runs out of memory says OOM. Prints a Markdown table; writes JSON and Markdown to --out.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "scripts")]

from common import write_results  # noqa: E402

from attnexp import attention  # noqa: E402
from attnexp.attention import MaskSpec  # noqa: E402
from attnexp.attention.kernels import attend  # noqa: E402
from attnexp.model.flops import peak_tflops  # noqa: E402

D_MODEL_HEADS = 16  # heads in every row (d_model = 16 x head dim)
FULL_GRID = ("mha", "alibi", "sliding_window", "gqa")  # every shape; the other variants at one length


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({torch.get_num_threads()} threads)"


def timed(fn, device, repeats: int) -> float:
    for _ in range(2):  # warm-up (and compile)
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bias_of(name: str, H: int, T: int, device):
    """The score bias the variant's layer would hand the kernel (alibi's distance penalty)."""
    if name != "alibi":
        return None
    from attnexp.attention.variants.alibi import DistancePenalty, alibi_slopes

    return DistancePenalty(alibi_slopes(H).to(device))


def row(name: str, backend: str, T: int, Dh: int, causal: bool, device, dtype, batch: int, repeats: int) -> dict:
    H = D_MODEL_HEADS
    G = 4 if name == "gqa" else H
    window = 256 if name == "sliding_window" else None
    q = torch.randn(batch, H, T, Dh, device=device, dtype=dtype, requires_grad=True)
    k = torch.randn(batch, G, T, Dh, device=device, dtype=dtype, requires_grad=True)
    v = torch.randn(batch, G, T, Dh, device=device, dtype=dtype, requires_grad=True)
    mask = MaskSpec(causal=causal, window=window)
    bias = bias_of(name, H, T, device)

    def ours():
        out, _ = attend(q, k, v, mask, backend=backend, bias=bias)
        out.float().sum().backward()

    def bare():  # the kernel alone, on the same tensors and mask (a dense mask where the variant needs one)
        kk, vv = (k, v) if G == H else (k.repeat_interleave(H // G, 1), v.repeat_interleave(H // G, 1))
        if window is None and bias is None:
            out = F.scaled_dot_product_attention(q, kk, vv, is_causal=causal)
        else:
            m = mask.allowed(T, device)
            am = bias.dense(T).to(dtype).masked_fill(~m, float("-inf")) if bias is not None else m
            out = F.scaled_dot_product_attention(q, kk, vv, attn_mask=am)
        out.float().sum().backward()

    fwd = 4 * batch * H * T * T * Dh * (min(window, T) / T if window else 1) / (2 if causal else 1)
    out = {"variant": name, "backend": backend, "T": T, "head_dim": Dh, "mask": "causal" if causal else "bidirectional",
           "batch": batch, "heads": H}
    for label, fn in (("ours", ours), ("bare", bare)):
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
            torch.cuda.empty_cache()
        try:
            s = timed(fn, device, repeats)
            out[f"{label}_ms"] = round(1000 * s, 3)
            out[f"{label}_tflops"] = round(3.5 * fwd / s / 1e12, 3)
            if device.type == "cuda":
                out[f"{label}_peak_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        except torch.OutOfMemoryError:
            out[f"{label}_ms"] = "OOM"
            torch.cuda.empty_cache()
        q.grad = k.grad = v.grad = None
    if isinstance(out.get("ours_ms"), float) and isinstance(out.get("bare_ms"), float):
        out["ours_vs_bare"] = round(out["ours_ms"] / out["bare_ms"], 3)
    return out


def grid(args, device) -> list[tuple]:
    if args.smoke:
        return [r for r in [("mha", b, 64, 16, c) for b in ("eager", "sdpa") for c in (True, False)] +
                [("alibi", "sdpa", 64, 16, True)] if not args.backends or r[1] in args.backends]
    lengths = args.lengths or ([128, 256, 512, 1024] if device.type == "cpu" else [128, 512, 1024, 2048, 4096, 8192])
    dims = [64] if device.type == "cpu" else [64, 128]
    backends = [b for b in (("eager", "sdpa") if device.type == "cpu" else ("eager", "sdpa", "flex"))
                if not args.backends or b in args.backends]
    out = []
    for name, cls in attention.registered().items():
        if not cls.softmax or "sdpa" not in cls.backends or name in ("torch_mha", "multi_head_list", "single_head",
                                                                    "dot_product", "rotary"):
            continue  # the kernel rows: rotary, the list of heads etc. hand the same kernel the same tensors as mha
        for b in backends:
            if b not in cls.backends:
                continue
            for T in (lengths if name in FULL_GRID or args.lengths else [1024]):
                for Dh in dims:
                    for causal in (True, False):
                        out.append((name, b, T, Dh, causal))
    if args.variants:
        out = [r for r in out if r[0] in args.variants]
    if args.lengths:  # the lengths asked, shortest first, causal first
        out.sort(key=lambda r: (r[2], r[3], not r[4]))
    elif args.backends:  # a part of the grid in a short window: every variant at T=1024, head dim 64, causal first
        out.sort(key=lambda r: (r[2] != 1024, r[3] != 64, not r[4]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--smoke", action="store_true", help="a handful of tiny rows (tests)")
    ap.add_argument("--budget-s", type=float, default=240, help="stop adding rows after this long")
    ap.add_argument("--tokens", type=int, default=None, help="batch x T per row (default: 32768 on CUDA, 4096 on CPU)")
    ap.add_argument("--repeats", type=int, default=None, help="timed repeats per row (default: 5 on CUDA, 3 on CPU)")
    ap.add_argument("--backends", type=lambda v: v.split(","), default=None,
                    help="comma list of eager, sdpa, flex (default: every one the device runs)")
    ap.add_argument("--lengths", type=lambda v: [int(x) for x in v.split(",")], default=None,
                    help="sequence lengths, e.g. 4096,8192,16384 (every variant at each; default: the grid's)")
    ap.add_argument("--variants", type=lambda v: v.split(","), default=None, help="these variants only, e.g. mha,alibi")
    ap.add_argument("--tag", default="", help="suffix for the result files, e.g. _flex")
    ap.add_argument("--out", default=str(REPO / "scripts" / "results"))
    args = ap.parse_args()
    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    if args.smoke:
        args.tokens, args.repeats = 128, 2
    args.tokens = args.tokens or (32768 if device.type == "cuda" else 4096)
    args.repeats = args.repeats or (5 if device.type == "cuda" else 3)
    peak = peak_tflops(device_name(device), "bf16-mixed" if dtype == torch.bfloat16 else "32-true")
    rows, t0, skipped, table = [], time.perf_counter(), 0, ""
    stem = f"kernels_{device.type}{args.tag}" + ("_smoke" if args.smoke else "")
    plan = grid(args, device)
    for i, spec in enumerate(plan):
        if time.perf_counter() - t0 > args.budget_s:
            skipped = len(plan) - i
            break
        name, backend, T, Dh, causal = spec
        if backend == "flex" and device.type == "cuda":  # each row a fresh compile, never past Dynamo's recompile limit
            torch._dynamo.reset()
        r = row(name, backend, T, Dh, causal, device, dtype, max(1, args.tokens // T), args.repeats)
        if peak and isinstance(r.get("ours_tflops"), float):
            r["ours_peak_share"] = round(r["ours_tflops"] / peak[0], 4)
        rows.append(r)
        print(json.dumps(r), flush=True)
        # after every row: a run stopped at its limit keeps the rows it finished
        table = write(args, stem, device, dtype, peak, rows, len(plan) - i - 1)
    if skipped or not rows:
        table = write(args, stem, device, dtype, peak, rows, skipped)
    print(f"\n{device_name(device)} · torch {torch.__version__} · {dtype} · fwd+bwd, median of {args.repeats}\n{table}")


def write(args, stem: str, device, dtype, peak, rows: list[dict], left: int) -> str:
    """The result files as they stand: the rows so far, and how many of the plan are still to come
    (`rows_left`) or were skipped for time."""
    meta = {"device": device_name(device), "torch": torch.__version__, "cuda": torch.version.cuda,
            "dtype": str(dtype).removeprefix("torch."), "date": datetime.now().isoformat(timespec="seconds"),
            "peak": peak[1] if peak else None, "peak_tflops": peak[0] if peak else None, "rows": len(rows),
            "rows_left": left, "budget_s": args.budget_s}
    cols = ["variant", "backend", "mask", "T", "head_dim", "batch", "ours_ms", "bare_ms", "ours_vs_bare", "ours_tflops",
            "ours_peak_share", "ours_peak_mb"]
    cols = [c for c in cols if any(c in r for r in rows)]
    return write_results(args.out, stem, meta, rows, f"Attention kernels on {meta['device']}", cols)


if __name__ == "__main__":
    main()
