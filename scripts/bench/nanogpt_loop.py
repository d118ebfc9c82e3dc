#!/usr/bin/env python
"""nanoGPT's own training loop beside `attnexp train`: the same model, tokens, precision and GPU, only
the loop differs (the GPU window's `nanogpt-loop` part).

- Each arm is one worker process that sets up its data, model and compiled graph once, then trains on
  command: one warm-up fit (the compile; reported, not timed with the rest), then timed fits that the
  parent alternates between the arms (A B, B A, A B, ...) until `--repeats` pairs or `--budget-s`.
- `nanogpt`: karpathy/nanoGPT's train.py loop (scripts/bench/nanogpt.py, NanoGPTLoop), its loss inside
  its compiled graph as in nanoGPT's `model(X, Y)`. `attnexp`: `attnexp train` with nothing to look at
  (maps.enabled=false logger=none trainer.enable_progress_bar=false), which with model.compile=true
  compiles the forward and the loss together too. `default`: `attnexp train` as the README runs it.
- Each fit: tokens/s from the median interval between batch starts (every epoch but the first), MFU
  from the same FLOP count for both arms (attnexp.model.flops), and the graphs dynamo compiled during
  the fit (0 after the warm-up: each arm compiles once per process).
- Then, with `--profile`, each arm once more under torch.profiler (step_profile.py): GPU busy share,
  device->host syncs a step, host time a step.

The result file is rewritten after every fit, so a run stopped at its limit keeps what finished.

    python scripts/bench/nanogpt_loop.py --budget-s 200 --profile model=gpt2 data=text data.max_len=1024 \\
        data.batch_size=8 model.compile=true        # on a GPU (scripts/gpu/window.json plans it)
    python scripts/bench/nanogpt_loop.py --repeats 2 data=text data.limit=60 trainer.max_epochs=2   # CPU, tiny

Writes <out>/nanogpt_loop_<cuda|cpu><tag>.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "scripts" / "bench")]

from common import provenance, scratch  # noqa: E402

LEAN = ["maps.enabled=false", "logger=none", "trainer.enable_progress_bar=false", "test=false"]
ARMS = {"nanogpt": [], "attnexp": LEAN, "default": ["test=false"]}  # nanoGPT scores no test split
MARK = "@@nanogpt-loop "  # a worker's answer line, among whatever else it prints
COMPILED = {
    "nanogpt": "torch.compile(WithLoss(model)): the Transformer and its cross-entropy in one graph, compiled once "
               "per process (nanoGPT's model(X, Y))",
    "attnexp": "AttnexpModule.step_fn = torch.compile(forward and loss), once per module",
    "default": "AttnexpModule.step_fn = torch.compile(forward and loss), once per module",
}


def graphs() -> int:
    """Graphs dynamo has compiled in this process so far."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


class Fitter:
    """One arm inside its worker: set up once, `fit()` as often as asked."""

    def __init__(self, arm: str, overrides: list[str], out: Path):
        import framework_overhead as fo

        self.arm, self.overrides, self.out, self.fo, self.n = arm, overrides, out, fo, 0
        self.run, dm, model, self.device = fo._setup([*ARMS[arm], *overrides], out)
        r = self.run
        self.tokens_per_step = r.data.batch_size * r.data.max_len * (r.trainer.accumulate_grad_batches or 1)
        self.flops_per_step = self._flops(model)
        if arm == "nanogpt":
            from nanogpt import NanoGPTLoop

            self.loop = NanoGPTLoop(self.run, dm, model, self.device, out)
        else:
            del model, dm  # attnexp builds its own, as a user's run does
            self.clock = fo._clock_in_recorder()

    def _flops(self, model) -> float:
        from attnexp.model.flops import train_flops_per_position

        m, T = self.run.model, self.run.data.max_len
        return self.tokens_per_step * train_flops_per_position(model.matmul_params(), self.run.attention, T,
                                                               m.d_model, m.n_heads, m.n_layers)

    def fit(self) -> dict:
        before, t0 = graphs(), time.perf_counter()
        if self.arm == "nanogpt":
            self.loop.reset()
            clock = self.fo.StepClock()
            r = self.loop.train(clock)
        else:
            from attnexp.api import compose, load_run, train

            self.n += 1
            clock = self.clock
            clock.epochs.clear()
            s = train(load_run(compose([*ARMS[self.arm], *self.overrides], self.out / f"fit{self.n}")))
            r = {"fit_s": s["train_time_s"], "steps": s["steps"], "final_val_loss": s["metrics"]["final"].get("val/loss"),
                 "own_perf": s.get("perf")}
        step_s = clock.step_ms() / 1000
        return {**r, "wall_s": round(time.perf_counter() - t0, 2), "step_ms": round(1000 * step_s, 3),
                "tokens_per_s": round(self.tokens_per_step / step_s, 1), "tflops": round(self.flops_per_step / step_s / 1e12, 4),
                "graphs_compiled": graphs() - before}


def worker(arm: str, overrides: list[str]) -> None:
    """An arm's process: answers `fit` and `profile PATH` lines on stdin with a MARK line, until `quit`."""
    with scratch(f"nanogpt-loop-{arm}-") as out:
        fitter = Fitter(arm, overrides, out)
        for line in sys.stdin:
            cmd, _, arg = line.strip().partition(" ")
            if cmd == "quit":
                break
            if cmd == "profile":
                from step_profile import StepProfiler

                fitter.fo.PROFILER = StepProfiler(Path(arg))
            result = fitter.fit()
            if fitter.fo.PROFILER is not None:
                fitter.fo.PROFILER.close()
                fitter.fo.PROFILER = None
            print(MARK + json.dumps(result), flush=True)


class Arm:
    """The parent's handle on a worker process."""

    def __init__(self, name: str, overrides: list[str]):
        self.name = name
        self.p = subprocess.Popen([sys.executable, __file__, "--worker", name, *overrides], cwd=REPO, text=True,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def ask(self, line: str) -> dict:
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        for out in self.p.stdout:
            if out.startswith(MARK):
                return json.loads(out[len(MARK):])
            print(f"  [{self.name}] {out}", end="", flush=True)
        raise SystemExit(f"nanogpt_loop.py: the {self.name} arm's process ended (exit {self.p.wait()}); its output is above")

    def close(self) -> None:
        if self.p.poll() is None:
            self.p.stdin.write("quit\n")
            self.p.stdin.close()
            self.p.wait(timeout=120)


def spread(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 4), "min": round(min(values), 4), "max": round(max(values), 4),
            "n": len(values)}


def summary(result: dict) -> dict:
    """The figures from the fits so far: tokens/s, MFU and, per adjacent pair, each arm's tokens/s over
    nanogpt's."""
    from attnexp.model.flops import peak_tflops

    arms = result["arms"]
    peak = peak_tflops(result["device"], "bf16-mixed" if result["device"] != "cpu" else "32-true")
    out = {"peak": peak[1] if peak else None}
    for name, a in arms.items():
        if a["fits"]:
            tok = [f["tokens_per_s"] for f in a["fits"]]
            out[name] = {"tokens_per_s": spread(tok),
                         "mfu": spread([f["tflops"] / peak[0] for f in a["fits"]]) if peak else None,
                         "graphs_compiled_after_warmup": sum(f["graphs_compiled"] for f in a["fits"])}
            if a.get("profile"):
                p = a["profile"]
                out[name].update(gpu_busy_pct=p.get("gpu_busy_pct"), syncs_per_step=p.get("syncs_per_step"),
                                 host_ms_per_step=p.get("host_ms_per_step"))
    base = arms.get("nanogpt", {}).get("fits", [])
    for name, a in arms.items():
        pairs = [f["tokens_per_s"] / b["tokens_per_s"] for f, b in zip(a["fits"], base)]
        if name != "nanogpt" and pairs:
            out[f"{name}_vs_nanogpt_tokens_per_s"] = spread(pairs)
    return out


def write(path: Path, result: dict) -> None:
    result["summary"] = summary(result)
    part = path.with_suffix(".json.part")
    part.write_text(json.dumps(result, indent=2) + "\n")
    part.replace(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arms", default="nanogpt,attnexp", help=f"comma list of: {', '.join(ARMS)} (nanogpt first)")
    ap.add_argument("--repeats", type=int, default=10, help="timed fits of each arm at most")
    ap.add_argument("--budget-s", type=float, default=None, help="no new pair of fits once this much time has gone")
    ap.add_argument("--profile", action="store_true", help="then each arm once under torch.profiler")
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", default=str(REPO / "scripts" / "results"))
    ap.add_argument("--worker", choices=sorted(ARMS), help=argparse.SUPPRESS)
    ap.add_argument("overrides", nargs="*", help="Hydra overrides for every arm (data=text: nanoGPT reads a token stream)")
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker, args.overrides)
    order = args.arms.split(",")
    if order[0] != "nanogpt" or set(order) - set(ARMS):
        ap.error(f"--arms: nanogpt first, then any of {', '.join(a for a in ARMS if a != 'nanogpt')}")
    t0 = time.perf_counter()
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    path = Path(args.out) / f"nanogpt_loop_{'cuda' if device != 'cpu' else 'cpu'}{args.tag}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    result = {"device": device, "torch": torch.__version__, "overrides": args.overrides, "repeats": args.repeats,
              "budget_s": args.budget_s, "made": provenance(),
              "arms": {a: {"compiled": COMPILED[a], "warmup": None, "fits": [], "profile": None} for a in order}}
    arms = {a: Arm(a, args.overrides) for a in order}
    try:
        fits(args, arms, result, path, t0)
    finally:
        for a in arms.values():
            a.close()
    print(json.dumps(result["summary"], indent=2))


def fits(args, arms: dict[str, Arm], result: dict, path: Path, t0: float) -> None:
    """Warm-ups, the alternating timed fits within the budget, then the profiles; the file after each."""
    for name, arm in arms.items():
        print(f"warm-up {name:>8}: its set-up, compile and one fit (not timed with the rest)", flush=True)
        result["arms"][name]["warmup"] = arm.ask("fit")
        w = result["arms"][name]["warmup"]
        print(f"warm-up {name:>8}: {w['wall_s']} s, {w['graphs_compiled']} graphs compiled", flush=True)
        write(path, result)
    order = list(arms)
    for i in range(args.repeats):
        pair_s = sum((result["arms"][a]["fits"] or [result["arms"][a]["warmup"]])[-1]["wall_s"] for a in order)
        if i and args.budget_s and time.perf_counter() - t0 + pair_s > args.budget_s:
            break
        for name in (order if i % 2 == 0 else order[::-1]):
            result["arms"][name]["fits"].append(arms[name].ask("fit"))
            f = result["arms"][name]["fits"][-1]
            print(f"fit {i} {name:>8}: {f['tokens_per_s']:,.0f} tokens/s, step {f['step_ms']} ms, "
                  f"{f['graphs_compiled']} graphs compiled", flush=True)
            write(path, result)
    if args.profile:
        for name, arm in arms.items():
            with scratch("nanogpt-loop-profile-") as d:
                result["arms"][name]["profile_fit"] = arm.ask(f"profile {d / 'profile.json'}")
                text = (d / "profile.json").read_text() if (d / "profile.json").is_file() else ""
            result["arms"][name]["profile"] = json.loads(text) if text.strip() else {
                "error": "the fit ended before its profiled steps"}
            write(path, result)


if __name__ == "__main__":
    main()
