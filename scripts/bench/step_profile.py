"""Where a training step's time goes: `torch.profiler` over a few steps of any arm of
scripts/bench/framework_overhead.py, summarised from its Chrome trace into a few numbers a step.

- `gpu_busy_pct`: the share of the window (first profiled step's start to the last one's end, on
  the host's clock, which the trace shares with the device's) in which at least one kernel, copy or
  memset runs on the GPU; the rest is time the GPU waited for the host.
- `top_gaps`: the longest stretches with nothing on the GPU, each with the kernels either side and
  the innermost host operations running when it began (what the host was doing instead).
- `syncs_per_step`: the runtime calls that make the host wait for the device
  (cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize, blocking cudaMemcpy).
- `top_host_ops`: the host operations with the most self time a step.

On a machine without CUDA only `top_host_ops` and `host_ms_per_step` mean anything (the smoke run).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import torch

DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
HOST_CATS = {"cpu_op", "user_annotation", "cuda_runtime", "cuda_driver"}
SYNCS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")  # and a blocking "cudaMemcpy"


def is_sync(name: str) -> bool:
    """A runtime call that waits for the device: not cudaMemcpyAsync (the first GPU window counted
    those, the three batch copies a step, as syncs)."""
    return name.startswith(SYNCS) or name == "cudaMemcpy"


class StepProfiler:
    """Profiles steps `start`..`start + steps` of the second epoch: `tick()` at each batch start
    (the benchmark's StepClock calls it), `epoch()` at each epoch start, `close()` at the end. An
    epoch shorter than that is profiled to its end (validation and the epoch's end then fall in the
    last step)."""

    def __init__(self, out: Path, steps: int = 8, start: int = 3):
        self.out, self.steps, self.start = Path(out), steps, start
        self.epoch_no, self.tick_no, self.prof, self.summary = -1, 0, None, None

    def epoch(self) -> None:
        self.close()
        self.epoch_no, self.tick_no = self.epoch_no + 1, 0

    def close(self) -> None:
        """Stops a profile still running (a profiler left running crashes the interpreter at exit)."""
        if self.prof is not None:
            self.prof.step()
            self.finish()

    def tick(self) -> None:
        self.tick_no += 1
        if self.epoch_no != 1 or self.summary is not None:
            return
        if self.tick_no == self.start:
            acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA]
                                                            if torch.cuda.is_available() else [])
            self.prof = torch.profiler.profile(activities=acts, schedule=torch.profiler.schedule(
                wait=0, warmup=1, active=self.steps, repeat=1))
            self.prof.start()
        elif self.prof is not None:
            self.prof.step()
            if self.tick_no == self.start + self.steps + 1:
                self.finish()

    def finish(self) -> None:
        self.prof.stop()
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            self.prof.export_chrome_trace(f.name)
            trace = json.loads(Path(f.name).read_text())
        self.summary = summarise(trace.get("traceEvents", []))
        self.out.write_text(json.dumps(self.summary, indent=2) + "\n")
        self.prof = None


def _spans(events: list[dict], cats: set[str]) -> list[tuple[float, float, dict]]:
    return sorted((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)), e) for e in events
                  if e.get("ph") == "X" and e.get("cat") in cats)


def _merged(spans) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for a, b, _ in spans:
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def summarise(events: list[dict]) -> dict:
    """The numbers above from a Chrome trace's events (ts, dur in µs)."""
    steps = [s for s in _spans(events, {"user_annotation"}) if s[2].get("name", "").startswith("ProfilerStep#")]
    if not steps:
        return {"error": "no ProfilerStep annotations in the trace"}
    lo, hi, n = steps[0][0], max(b for _, b, _ in steps), len(steps)
    host = [s for s in _spans(events, HOST_CATS) if lo <= s[0] < hi]
    device = [(max(a, lo), min(b, hi), e) for a, b, e in _spans(events, DEVICE_CATS) if b > lo and a < hi]
    busy = _merged(device)
    result = {"steps": n, "host_ms_per_step": round((hi - lo) / n / 1000, 3),
              "syncs_per_step": round(sum(1 for _, _, e in host if is_sync(e.get("name", ""))) / n, 2),
              "top_host_ops": _top_host_ops(host, n)}
    if device:
        result["gpu_busy_pct"] = round(100 * sum(b - a for a, b in busy) / (hi - lo), 1)
        result["top_gaps"] = _gaps(busy, device, host, lo, hi)
    return result


def _top_host_ops(host, n: int, k: int = 8) -> list[dict]:
    """Self time (an op's time less its children's, nesting per thread) summed by name, the top k,
    in µs a step."""
    total: dict[str, float] = {}
    threads: dict[tuple, list] = {}
    for span in host:
        threads.setdefault((span[2].get("pid"), span[2].get("tid")), []).append(span)

    def close(stack):
        end, name, child, start = stack.pop()
        total[name] = total.get(name, 0.0) + (end - start) - child
        if stack:
            stack[-1][2] += end - start

    for spans in threads.values():
        stack: list[list] = []
        for a, b, e in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1][0] <= a:
                close(stack)
            name = e.get("name", "?")
            stack.append([b, "(Python, in no op)" if name.startswith("ProfilerStep#") else name, 0.0, a])
        while stack:
            close(stack)
    top = sorted(total.items(), key=lambda kv: -kv[1])[:k]
    return [{"op": name[:80], "self_us_per_step": round(us / n, 1)} for name, us in top]


def _gaps(busy, device, host, lo: float, hi: float, k: int = 5) -> list[dict]:
    edges = [(lo, busy[0][0])] + [(busy[i][1], busy[i + 1][0]) for i in range(len(busy) - 1)] + [(busy[-1][1], hi)]
    out = []
    for a, b in sorted(edges, key=lambda g: g[0] - g[1])[:k]:
        if b - a <= 0:
            continue
        before = [e["name"] for x, y, e in device if y <= a]
        after = [e["name"] for x, y, e in device if x >= b]
        running = sorted((y - x, e["name"]) for x, y, e in host if x <= a < y)
        out.append({"gap_us": round(b - a, 1), "after_kernel": before[-1][:60] if before else None,
                    "before_kernel": after[0][:60] if after else None, "host_doing": [nm[:60] for _, nm in running[:3]]})
    return out
