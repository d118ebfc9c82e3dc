#!/usr/bin/env python
"""Does a chunked cross-entropy pay at a large vocabulary? The language-model loss as attnexp's
training step computes it (the output layer's logits for every token, materialised in fp32, then
F.cross_entropy and the argmax for accuracy) against the same computed a chunk of tokens at a time
under activation checkpointing (torch.utils.checkpoint: each chunk's logits live only inside it and
are recomputed in the backward pass; the usual pure-PyTorch form of what Liger's fused linear
cross-entropy does in one Triton kernel). Same loss and gradients (checked first), then time of
forward + backward (several interleaved repeats, ratios in one run) and peak memory (each arm in its
own process: its resident set on a CPU, torch's allocator peak on a GPU).

    python scripts/bench/cross_entropy.py                         # GPT-2's vocabulary and width, 8 x 512 tokens
    python scripts/bench/cross_entropy.py --tokens 2048 --vocab 32000 --repeats 5
    python scripts/gpu/suite.py --parts cross-entropy               # on a GPU: the allocator's peak too

Prints a table and writes scripts/results/cross_entropy_<device>.json. It is kept in the training
step only if it pays: faster, or the memory it saves lets a run fit that did not.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

REPO = Path(__file__).resolve().parents[2]
IGNORE = -100


def full(h, weight, labels):
    """As the training step: every token's logits at once (fp32), the loss and the argmax's hits."""
    logits = (h @ weight.t()).float()
    loss = F.cross_entropy(logits, labels, ignore_index=IGNORE, reduction="sum")
    return loss, (logits.detach().argmax(-1) == labels).sum()


def chunked(h, weight, labels, chunk: int = 1024):
    """The same, `chunk` tokens at a time, each chunk's logits recomputed in the backward pass."""
    loss = h.new_zeros((), dtype=torch.float32)
    hits = torch.zeros((), dtype=torch.long, device=h.device)
    for i in range(0, h.shape[0], chunk):
        part_loss, part_hits = checkpoint(full, h[i:i + chunk], weight, labels[i:i + chunk], use_reentrant=False)
        loss, hits = loss + part_loss, hits + part_hits
    return loss, hits


ARMS = ("full", "chunked")


def inputs(n: int, d: int, vocab: int, device: str, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(n, d, generator=g).to(device).requires_grad_()
    weight = (torch.randn(vocab, d, generator=g) * d ** -0.5).to(device).requires_grad_()
    labels = torch.randint(0, vocab, (n,), generator=g)
    labels[:: 7] = IGNORE  # padding, as a batch of varied lengths has
    return h, weight, labels.to(device)


def step(arm: str, h, weight, labels, chunk: int = 1024) -> tuple[torch.Tensor, torch.Tensor]:
    h.grad = weight.grad = None
    loss, hits = full(h, weight, labels) if arm == "full" else chunked(h, weight, labels, chunk)
    (loss / (labels != IGNORE).sum()).backward()
    return loss.detach(), hits


def same(args) -> dict:
    """Loss, hits and both gradients of the two arms, side by side."""
    h, weight, labels = inputs(args.tokens, args.d, args.vocab, args.device)
    out = {}
    for arm in ARMS:
        loss, hits = step(arm, h, weight, labels, args.chunk)
        out[arm] = (loss, hits, h.grad.clone(), weight.grad.clone())
    (la, ca, ha, wa), (lb, cb, hb, wb) = out["full"], out["chunked"]
    return {"loss_rel_diff": float((la - lb).abs() / la.abs()), "hits_equal": bool(ca == cb),
            "grad_h_max_diff": float((ha - hb).abs().max()), "grad_w_max_diff": float((wa - wb).abs().max())}


def _status_kib(field: str) -> int:
    return next(int(line.split()[1]) for line in Path("/proc/self/status").read_text().splitlines() if line.startswith(field))


def one_arm_memory(args) -> None:
    """In its own process: one step of --arm, then its peak memory above what was held before it, as
    JSON on stdout (a GPU: torch's allocator peak; a CPU: the resident set's high-water mark, reset
    before the step through /proc/self/clear_refs, Linux's own way)."""
    h, weight, labels = inputs(args.tokens, args.d, args.vocab, args.device)
    if args.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    else:
        before = _status_kib("VmRSS:")
        Path("/proc/self/clear_refs").write_text("5")  # the high-water mark back to the resident set now
    step(args.arm, h, weight, labels, args.chunk)
    if args.device == "cuda":
        peak = (torch.cuda.max_memory_allocated() - before) / 2**20
    else:
        peak = (_status_kib("VmHWM:") - before) / 1024
    print(json.dumps({"peak_mib": round(peak, 1)}))


def timings(args) -> dict[str, list[float]]:
    h, weight, labels = inputs(args.tokens, args.d, args.vocab, args.device)
    for arm in ARMS:  # warm-up
        step(arm, h, weight, labels, args.chunk)
    out: dict[str, list[float]] = {a: [] for a in ARMS}
    for i in range(args.repeats):
        for arm in ARMS if i % 2 == 0 else list(ARMS)[::-1]:
            if args.device == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            step(arm, h, weight, labels, args.chunk)
            if args.device == "cuda":
                torch.cuda.synchronize()
            out[arm].append(time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=8 * 512)
    ap.add_argument("--d", type=int, default=768)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--chunk", type=int, default=1024, help="tokens a chunk")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--out", default=str(REPO / "scripts" / "results"), help="folder of the result file")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (the GPU suite's smoke test)")
    ap.add_argument("--arm", help=argparse.SUPPRESS)  # one arm's memory, in a child process
    args = ap.parse_args()
    if args.smoke:  # several chunks, so the check is not of one chunk against itself; no memory processes
        args.tokens, args.d, args.vocab, args.repeats, args.chunk = 256, 64, 1000, 1, 64
    if args.arm:
        return one_arm_memory(args)
    check = same(args)
    times = timings(args)
    flags = [f"--tokens={args.tokens}", f"--d={args.d}", f"--vocab={args.vocab}", f"--device={args.device}",
             f"--chunk={args.chunk}"]
    memory = {arm: None if args.smoke else json.loads(subprocess.run(
        [sys.executable, __file__, *flags, f"--arm={arm}"], capture_output=True, text=True, check=True).stdout)["peak_mib"]
        for arm in ARMS}
    med = {a: statistics.median(t) for a, t in times.items()}
    device = f"{args.device} ({platform.machine()}, {torch.get_num_threads()} threads)" if args.device == "cpu" else \
        torch.cuda.get_device_name()
    result = {"device": device, "torch": torch.__version__, "tokens": args.tokens, "d": args.d, "vocab": args.vocab,
              "repeats": args.repeats, "same": check, "median_s": med, "times_s": times, "peak_mib": memory,
              "chunked_vs_full_time": round(med["chunked"] / med["full"], 3),
              "chunk": args.chunk,
              "chunked_vs_full_memory": round(memory["chunked"] / memory["full"], 3) if memory["full"] else None}
    print(f"{device}: {args.tokens} tokens, d={args.d}, vocabulary {args.vocab}; same loss and gradients: {check}")
    for arm in ARMS:
        peak = f"   peak {memory[arm]:.1f} MiB" if memory[arm] else ""
        print(f"  {arm:8s} forward + backward {med[arm] * 1e3:8.1f} ms{peak}")
    mem = result["chunked_vs_full_memory"]
    print(f"  chunked / full: time {result['chunked_vs_full_time']:.2f}x, memory " + (f"{mem:.2f}x" if mem else "not measured"))
    out = Path(args.out) / f"cross_entropy_{'gpu' if args.device == 'cuda' else 'cpu'}{'_smoke' if args.smoke else ''}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
