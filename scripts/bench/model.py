#!/usr/bin/env python
"""Whole-model training throughput on one device: attnexp's Transformer in a bare training loop on
random tokens (no data pipeline), with and without `torch.compile`: tokens/s, model FLOPs
utilisation (attnexp.perf's count over the device's dense peak), peak memory. Beside it, at the
GPT-2-small shape, nanoGPT's own GPT (scripts/bench/nanogpt.py, transcribed from its model.py) in
the same loop, optimizer and precision: `vs_nanogpt` is our tokens/s over its, compiled or not alike.

    python scripts/bench/model.py                      # CUDA: GPT-2-small-sized (T=1024) and model=small, bf16
    python scripts/bench/model.py --smoke              # CPU, tiny, seconds: the tests run this

Prints a table; writes JSON and Markdown to --out (model_<device>.json/.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "scripts")]

from common import write_results  # noqa: E402

from attnexp.config import AttentionConfig, ModelConfig, OptimConfig  # noqa: E402
from attnexp.model import Transformer, lm_loss  # noqa: E402
from attnexp.model.flops import peak_tflops, train_flops_per_position  # noqa: E402
from attnexp.training.module import adamw_warmup_cosine  # noqa: E402

SIZES = {  # name: (d_model, heads, layers, T, batch, vocab)
    "gpt2-small": (768, 12, 12, 1024, 16, 50304),
    "small": (128, 4, 4, 256, 64, 8192),
    "tiny": (32, 2, 2, 32, 4, 128),
}


def build(arm: str, size: str, device: torch.device):
    """The model and a function of (input ids, targets) -> loss, the scope `torch.compile` takes: attnexp's
    Transformer with the SDPA backend and its loss (as model.compile compiles them in training), or
    nanoGPT's GPT of the same shape (its default bias=True, as GPT-2; its forward holds the loss)."""
    d, h, layers, T, B, V = SIZES[size]
    if arm == "nanogpt":
        from nanogpt import GPT, GPTConfig

        model = GPT(GPTConfig(block_size=T, vocab_size=V, n_layer=layers, n_head=h, n_embd=d)).to(device)
        return model, lambda x, y: model(x, y)[1]
    model = Transformer(ModelConfig(d_model=d, n_heads=h, n_layers=layers, max_len=T),
                        AttentionConfig(name="mha", backend="sdpa"), V).to(device)
    return model, lambda x, y: lm_loss(model(x).logits, y)


def measure(size: str, compile_: bool, device: torch.device, steps: int, arm: str = "attnexp") -> dict:
    d, h, layers, T, B, V = SIZES[size]
    torch.manual_seed(0)
    model, loss_of = build(arm, size, device)
    opt, sched = adamw_warmup_cosine(model.parameters(), OptimConfig(), steps + 5, fused=device.type == "cuda")
    fwd = torch.compile(loss_of) if compile_ else loss_of
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    ids = torch.randint(0, V, (B, T + 1), device=device)
    x, y = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()  # as nanoGPT's get_batch gives them

    def step():
        with torch.autocast(device.type, dtype=dtype, enabled=device.type == "cuda"):
            loss = fwd(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()

    t_compile = time.perf_counter()
    for _ in range(3):  # warm-up (and compilation)
        step()
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    warm_s = t0 - t_compile
    for _ in range(steps):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    s = (time.perf_counter() - t0) / steps
    matmul = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))  # both arms alike
    flops = B * T * train_flops_per_position(matmul, AttentionConfig(name="mha"), T, d, h, layers)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    peak = peak_tflops(name, "bf16-mixed" if device.type == "cuda" else "32-true")
    params = sum(p.numel() for p in model.parameters())
    return {"arm": arm, "model": size, "compile": compile_, "params_m": round(params / 1e6, 1), "T": T, "batch": B,
            "step_ms": round(1000 * s, 2), "tokens_per_s": round(B * T / s), "tflops": round(flops / s / 1e12, 2),
            "mfu": round(flops / s / 1e12 / peak[0], 4) if peak else None,
            "peak_mb": round(torch.cuda.max_memory_allocated() / 2**20) if device.type == "cuda" else None,
            "warmup_s": round(warm_s, 1)}


def vs_nanogpt(rows: list[dict]) -> None:
    """Each attnexp row's tokens/s over nanoGPT's at the same size and compile, where both ran."""
    theirs = {(r["model"], r["compile"]): r.get("tokens_per_s") for r in rows if r["arm"] == "nanogpt"}
    for r in rows:
        t = theirs.get((r["model"], r["compile"]))
        if r["arm"] == "attnexp" and isinstance(t, int) and isinstance(r.get("tokens_per_s"), int):
            r["vs_nanogpt"] = round(r["tokens_per_s"] / t, 3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--sizes", default="gpt2-small,small")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--no-compile", action="store_true", help="skip the compiled rows")
    ap.add_argument("--nanogpt", default="gpt2-small", help="sizes nanoGPT's GPT is timed at too ('' for none)")
    ap.add_argument("--out", default=str(REPO / "scripts" / "results"))
    args = ap.parse_args()
    device = torch.device(args.device)
    sizes = ["tiny"] if args.smoke else args.sizes.split(",")
    compiles = [False] if (args.smoke or args.no_compile) else [False, True]
    twins = set(sizes) if args.smoke else set(filter(None, args.nanogpt.split(",")))
    rows = []
    for size in sizes:
        for c in compiles:
            for arm in ["attnexp", "nanogpt"] if size in twins else ["attnexp"]:
                try:
                    r = measure(size, c, device, 3 if args.smoke else args.steps, arm)
                except torch.OutOfMemoryError:
                    r = {"arm": arm, "model": size, "compile": c, "step_ms": "OOM"}
                rows.append(r)
                print(json.dumps(r), flush=True)
    vs_nanogpt(rows)
    meta = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu", "torch": torch.__version__,
            "cuda": torch.version.cuda, "date": datetime.now().isoformat(timespec="seconds")}
    cols = ["arm", "model", "compile", "params_m", "T", "batch", "step_ms", "tokens_per_s", "tflops", "mfu", "vs_nanogpt",
            "peak_mb", "warmup_s"]
    stem = f"model_{device.type}" + ("_smoke" if args.smoke else "")
    table = write_results(args.out, stem, meta, rows, f"Whole model on {meta['device']}", cols)
    print(f"\n{meta['device']} · torch {meta['torch']}\n{table}")


if __name__ == "__main__":
    main()
