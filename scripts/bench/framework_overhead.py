#!/usr/bin/env python
"""What the framework costs over a plain PyTorch loop, training the same model on the same batches.

Four arms, each in a fresh process, in rotating order (a repeat count that is a multiple of 4 puts
each arm in each place equally often), `--repeats` times; medians are reported, and each arm's
ratio to `bare` and to `plain`:

- `plain`: a nanoGPT-style loop written by hand: the same `Transformer`, DataLoaders, AdamW and
  warmup+cosine schedule (`attnexp.training.module.adamw_warmup_cosine`) and gradient clipping; a validation
  pass (loss, accuracy) and a `torch.save` of model + optimizer after every epoch; bf16 autocast
  on a GPU.
- `bare`: the floor Lightning sets: a LightningModule of a dozen lines around the same model,
  optimizer, schedule and clipping (Trainer's gradient_clip_val), no logger, no progress bar, no
  checkpoint callback (a torch.save after every epoch, as the plain loop does), a validation pass.
- `lean`: `attnexp train maps.enabled=false logger=none trainer.enable_progress_bar=false`:
  Lightning, our module, torchmetrics, checkpointing and summary.json, nothing to look at.
- `default`: `attnexp train` as the README runs it: progress bar, TensorBoard, map logging.
- `nanogpt`: nanoGPT's own train.py loop, transcribed (`run_nanogpt`): its memmap `get_batch`, its
  AdamW, compile, gradient accumulation and evaluation, around the same model and tokens (data=text).

Beside nanoGPT's loop, at a GPT-2-shaped tiny model on 20 Newsgroups bytes (the figures of issue 54):

    python scripts/bench/framework_overhead.py --repeats 8 --arms nanogpt,lean,default --tag _nanogpt_loop \
        data=text attention=causal model.n_layers=4 model.d_model=128 model.n_heads=4 data.max_len=128 \
        data.batch_size=16 data.limit=300 trainer.max_epochs=3

    python scripts/bench/framework_overhead.py --repeats 6
    python scripts/bench/framework_overhead.py --tag _small model=small   # overrides for every arm

With `--profile`, each arm then runs once more under `torch.profiler` (scripts/bench/step_profile.py:
8 steps of the second epoch; not timed with the repeats): the GPU's busy share of those steps, the
longest stretches it waited for the host and what the host was doing then, syncs a step.

Step time is the median interval between the starts of consecutive training batches in every
epoch but the first (data loading, forward, backward, optimizer, hooks, logging; not validation).
Fit time runs from the first training batch's epoch to the end of the last epoch, validation and
checkpoints included. Prints a table and writes scripts/results/framework_overhead_<device>.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from common import markdown_table, provenance, scratch  # noqa: E402

ARMS = {"plain": [], "bare": [], "lean": ["maps.enabled=false", "logger=none", "trainer.enable_progress_bar=false"],
        "default": [],
        # the default with collation in two worker processes (persistent, pinned memory on a GPU): the H100's
        # profile had the GPU idle while the main thread collated the next batch
        "workers": ["data.num_workers=2"],
        "nanogpt": []}  # nanoGPT's train.py loop (run_nanogpt): needs data=text


PROFILER = None  # a step_profile.StepProfiler in an arm's process run with --profile-out


class StepClock:
    """Batch-start times per epoch; the same clock for every loop (and the profiler's trigger)."""

    def __init__(self):
        self.epochs: list[list[float]] = []

    def epoch(self):
        self.epochs.append([])
        if PROFILER is not None:
            PROFILER.epoch()

    def tick(self):
        self.epochs[-1].append(time.perf_counter())
        if PROFILER is not None:
            PROFILER.tick()

    def step_ms(self) -> float:
        gaps = [b - a for ts in self.epochs[1:] for a, b in zip(ts, ts[1:])]
        return round(1000 * statistics.median(gaps), 3) if gaps else float("nan")


def _clock_in_recorder() -> StepClock:
    """The same clock inside attnexp's own RunRecorder hooks: an extra Lightning callback would add
    its own dispatch cost (~0.1 ms a step) to the arm being measured."""
    from attnexp.training.recorder import RunRecorder

    clock = StepClock()
    batch_start, epoch_start = RunRecorder.on_train_batch_start, RunRecorder.on_train_epoch_start

    def on_train_epoch_start(self, trainer, pl_module):
        clock.epoch()
        epoch_start(self, trainer, pl_module)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        clock.tick()
        batch_start(self, trainer, pl_module, batch, batch_idx)

    RunRecorder.on_train_epoch_start, RunRecorder.on_train_batch_start = on_train_epoch_start, on_train_batch_start
    return clock


def run_attnexp(overrides: list[str], out_dir: Path) -> dict:
    from attnexp.api import compose, load_run, train

    clock = _clock_in_recorder()
    s = train(load_run(compose(overrides, out_dir)))
    return {"fit_s": s["train_time_s"], "step_ms": clock.step_ms(), "steps": s["steps"],
            "device": s["device"], "final_val_loss": s["metrics"]["final"].get("val/loss")}


def validate(model, val_dl, step, device) -> float:
    """The plain loop's validation: the mean loss over the labelled positions (accuracy counted too)."""
    model.eval()
    tot = torch.zeros(3, device=device)  # loss sum, correct, counted
    with torch.no_grad():
        for batch in val_dl:
            loss, logits, labels = step(batch)
            keep = labels != -100
            n = keep.sum()
            tot += torch.stack([loss.float() * n, ((logits.argmax(-1) == labels) & keep).sum(), n])
    return (tot[0] / tot[2]).item()


def run_bare(overrides: list[str], out_dir: Path) -> dict:
    """The same training in the smallest LightningModule that does it: what Lightning itself costs."""
    import lightning as L
    import torch.nn.functional as F

    from attnexp.model import lm_loss

    run, dm, model, device = _setup(overrides, out_dir)
    classify = run.task.name == "classify"
    clock = StepClock()
    epochs = run.trainer.max_epochs
    clip = run.trainer.gradient_clip_val or 0.0

    class Bare(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = model

        def _loss(self, batch):
            logits = self.model(batch["input_ids"], batch["pad_mask"] if batch["padded"] else None).logits
            return F.cross_entropy(logits, batch["labels"]) if classify else lm_loss(logits, batch["labels"])

        def training_step(self, batch, batch_idx):
            return self._loss(batch)

        def validation_step(self, batch, batch_idx):
            self._loss(batch)

        def on_train_epoch_start(self):
            clock.epoch()

        def on_train_batch_start(self, batch, batch_idx):
            clock.tick()

        def on_before_optimizer_step(self, optimizer):
            # clipped here, not by Trainer(gradient_clip_val=): Lightning's MixedPrecision refuses to clip for a
            # fused AdamW even under bf16, where nothing is scaled (Lightning #21435; attnexp's module does the same)
            if clip:
                torch.nn.utils.clip_grad_norm_(self.parameters(), clip)

        def on_train_epoch_end(self):
            torch.save({"model": self.model.state_dict(), "optimizer": self.optimizers().state_dict()}, out_dir / "last.pt")

        def configure_optimizers(self):
            from attnexp.training.module import adamw_warmup_cosine

            steps = int(self.trainer.estimated_stepping_batches)
            opt, sched = adamw_warmup_cosine(self.parameters(), run.optim, steps, fused=True)
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    trainer = L.Trainer(accelerator=device.type, devices=1, max_epochs=epochs, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                        precision="bf16-mixed" if device.type == "cuda" else "32-true")
    t0 = time.perf_counter()
    trainer.fit(Bare(), datamodule=dm)
    fit_s = time.perf_counter() - t0
    return {"fit_s": round(fit_s, 2), "step_ms": clock.step_ms(), "steps": trainer.global_step, "device": _device(device),
            "final_val_loss": None}


def _device(device) -> str:
    return torch.cuda.get_device_name(0) if device.type == "cuda" else f"cpu ({torch.get_num_threads()} threads)"


def _setup(overrides: list[str], out_dir: Path):
    """The run's config, its data set up, its model on its device: the same for the plain and bare arms."""
    import random

    from attnexp.api import compose, load_run
    from attnexp.data import build_datamodule
    from attnexp.model import Transformer
    from attnexp.training import threads
    from attnexp.training.device import training_on_cpu

    run = load_run(compose(overrides, out_dir))
    random.seed(run.seed)
    torch.manual_seed(run.seed)
    torch.set_float32_matmul_precision("high")
    device = torch.device("cpu" if training_on_cpu(run.trainer) or not torch.cuda.is_available() else "cuda")
    cores = threads.CoreSample()  # the threads attnexp's own fit.prepare gives a run: `threads=N`, else the free cores
    if given := threads.given_threads(run):
        torch.set_num_threads(given)
    dm = build_datamodule(run.data, run.task, causal=run.attention.causal, run_dir=str(out_dir))
    dm.setup("fit")
    if not given and (free := threads.free_threads(cores)):
        torch.set_num_threads(free)
    classify = run.task.name == "classify"
    model = Transformer(run.model, run.attention, dm.vocab_size, head="classify" if classify else "lm",
                        num_classes=dm.num_classes, pooling=run.task.pooling).to(device)
    return run, dm, model, device


def run_plain(overrides: list[str], out_dir: Path) -> dict:
    """The loop a researcher would write with nothing but torch (nanoGPT's train.py, shortened)."""
    import torch.nn.functional as F

    from attnexp.model import lm_loss
    from attnexp.training.module import adamw_warmup_cosine

    run, dm, model, device = _setup(overrides, out_dir)
    classify = run.task.name == "classify"
    train_dl, val_dl = dm.train_dataloader(), dm.val_dataloader()
    epochs = run.trainer.max_epochs
    opt, sched = adamw_warmup_cosine(model.parameters(), run.optim, epochs * len(train_dl), fused=True)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")
    clip = run.trainer.gradient_clip_val or 0.0

    def step(batch):
        batch = {k: v.to(device, non_blocking=True) if torch.is_tensor(v) else v for k, v in batch.items()}
        with autocast:
            logits = model(batch["input_ids"], batch["pad_mask"] if batch["padded"] else None).logits
            loss = F.cross_entropy(logits, batch["labels"]) if classify else lm_loss(logits, batch["labels"])
        return loss, logits, batch["labels"]

    clock = StepClock()
    t0 = time.perf_counter()
    for epoch in range(epochs):
        model.train()
        train_dl.batch_sampler.set_epoch(epoch)  # as with a DistributedSampler: a new order every epoch
        clock.epoch()
        for batch in train_dl:
            clock.tick()
            loss, _, _ = step(batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            opt.step()
            sched.step()
        val_loss = validate(model, val_dl, step, device)
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, out_dir / "last.pt")
    fit_s = time.perf_counter() - t0
    return {"fit_s": round(fit_s, 2), "step_ms": clock.step_ms(), "steps": epochs * len(train_dl),
            "device": _device(device), "final_val_loss": round(val_loss, 6)}


def run_nanogpt(overrides: list[str], out_dir: Path) -> dict:
    """nanoGPT's own train.py loop (nanogpt.NanoGPTLoop) around the same model and tokens, on this bench's clock."""
    from nanogpt import NanoGPTLoop

    run, dm, model, device = _setup(overrides, out_dir)
    clock = StepClock()
    return {**NanoGPTLoop(run, dm, model, device, out_dir).train(clock), "step_ms": clock.step_ms(),
            "device": _device(device)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--arms", default="plain,bare,lean,default", help=f"comma list of: {', '.join(ARMS)}")
    ap.add_argument("--tag", default="", help="suffix for the result file")
    ap.add_argument("--out", default=str(REPO / "scripts" / "results"), help="folder for the result file")
    ap.add_argument("--arm", choices=sorted(ARMS), help=argparse.SUPPRESS)  # one arm, in this process
    ap.add_argument("--result", help=argparse.SUPPRESS)
    ap.add_argument("--profile", nargs="?", const="all", default=None,
                    help="then each arm (or these, a comma list) once under torch.profiler (step_profile.py)")
    ap.add_argument("--profile-out", help=argparse.SUPPRESS)
    ap.add_argument("overrides", nargs="*", help="Hydra overrides for every arm, e.g. experiment=copy")
    args = ap.parse_args()

    if args.arm:
        return run_arm(args)

    order = args.arms.split(",")
    for a in order:
        if a not in ARMS:
            ap.error(f"--arms: unknown arm {a!r}; choose from {', '.join(ARMS)}")
    runs: dict[str, list[dict]] = {a: [] for a in order}
    for i in range(args.repeats):
        for arm in order[i % len(order):] + order[:i % len(order)]:  # each arm takes each place in turn
            r = arm_process(arm, args.overrides)
            runs[arm].append(r)
            print(f"repeat {i} {arm:>7}: step {r['step_ms']:.2f} ms, fit {r['fit_s']:.2f} s, "
                  f"{r['steps']} steps, final val loss {r['final_val_loss']}", flush=True)
        summarise(args, order, runs, {})  # after every repeat: a run stopped at its limit keeps what finished

    profiled = order if args.profile == "all" else [a for a in order if a in (args.profile or "").split(",")]
    profiles = {}
    for arm in profiled:
        profiles[arm] = profile(arm, args.overrides)
        summarise(args, order, runs, profiles)
    med, over = summarise(args, order, runs, profiles)
    device = runs[order[0]][0]["device"]
    print(f"\n{device}, median of {args.repeats}, overrides: {args.overrides or 'none'}")
    bare = "bare" if "bare" in med else order[0]
    print(markdown_table([[a, f"{1000 * med[a]['step_ms']:.0f}", f"{over[a]['step_ms']:+.1f}%",
                           f"{med[a]['step_ms'] / med[bare]['step_ms']:.3f}x", f"{med[a]['fit_s']:.2f}",
                           f"{med[a]['fit_s'] / med[bare]['fit_s']:.3f}x"] for a in order],
                         ["arm", "step us", f"vs {order[0]}", f"step vs {bare}", "fit s", f"fit vs {bare}"]))
    if profiles:
        print(profile_table(profiles))


def summarise(args, order: list[str], runs: dict[str, list[dict]], profiles: dict) -> tuple[dict, dict]:
    """The result file from the repeats so far (`repeats_done` of `repeats`): (medians, overhead in %)."""
    done = {a: rs for a, rs in runs.items() if rs}
    med = {a: {k: statistics.median(r[k] for r in rs) for k in ("step_ms", "fit_s")} for a, rs in done.items()}
    first = next(a for a in order if a in med)
    base = med[first]
    over = {a: {k: round(100 * (m[k] / base[k] - 1), 1) for k in m} for a, m in med.items()}
    ratios = {f"{a}_vs_{b}": {k: round(med[a][k] / med[b][k], 3) for k in ("step_ms", "fit_s")}
              for b in ("bare", "plain") if b in med for a in order if a != b and a in med}
    result = {"device": done[first][0]["device"], "torch": torch.__version__, "made": provenance(), "repeats": args.repeats,
              "repeats_done": min(len(rs) for rs in runs.values()), "overrides": args.overrides,
              "median": med, "step_us": {a: round(1000 * m["step_ms"], 1) for a, m in med.items()}, "ratios": ratios,
              f"overhead_pct_vs_{order[0]}": over, "runs": runs,
              **({"profile": profiles} if profiles else {})}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"framework_overhead_{'gpu' if torch.cuda.is_available() else 'cpu'}{args.tag}.json"
    part = path.with_suffix(".json.part")
    part.write_text(json.dumps(result, indent=2) + "\n")
    part.replace(path)  # whole or not at all, if the run is killed while writing
    return med, over


def run_arm(args) -> None:
    """One arm in this process (the parent runs each arm so): its result to --result, its profile
    summary to --profile-out when given."""
    global PROFILER
    if args.profile_out:
        from step_profile import StepProfiler

        PROFILER = StepProfiler(Path(args.profile_out))
    fn = {"plain": run_plain, "bare": run_bare, "nanogpt": run_nanogpt}.get(args.arm, run_attnexp)
    with scratch(f"overhead-{args.arm}-") as out_dir:
        result = fn([*ARMS[args.arm], *args.overrides], out_dir)
    if PROFILER is not None:
        PROFILER.close()
    Path(args.result).write_text(json.dumps(result))


def arm_process(arm: str, overrides: list[str], profile_out: Path | None = None) -> dict:
    """One run of an arm in a fresh process (run_arm there); its result."""
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([sys.executable, __file__, "--arm", arm, "--result", f.name,
                        *(["--profile-out", str(profile_out)] if profile_out else []), *overrides],
                       cwd=REPO, check=True, capture_output=True)
        return json.loads(Path(f.name).read_text())


def profile(arm: str, overrides: list[str]) -> dict:
    """One more run of an arm, its steps 3-11 of the second epoch under torch.profiler, summarised."""
    with tempfile.NamedTemporaryFile(suffix=".json") as p:
        arm_process(arm, overrides, Path(p.name))
        text = Path(p.name).read_text()
    return json.loads(text) if text.strip() else {"error": "the run ended before its profiled steps"}


def profile_table(profiles: dict) -> str:
    rows = []
    for arm, s in profiles.items():
        gap = (s.get("top_gaps") or [{}])[0]
        rows.append([arm, s.get("host_ms_per_step", ""), s.get("gpu_busy_pct", "n/a"), s.get("syncs_per_step", ""),
                     f"{gap.get('gap_us', '')} us: {', '.join(gap.get('host_doing', []))}" if gap else "",
                     ", ".join(f"{o['op']} {o['self_us_per_step']}" for o in s.get("top_host_ops", [])[:3])])
    return "\n" + markdown_table(rows, ["arm", "ms a step", "GPU busy %", "syncs a step", "longest GPU gap",
                                        "top host ops (self us a step)"])


if __name__ == "__main__":
    main()
