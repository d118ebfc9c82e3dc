#!/usr/bin/env python
"""Everything attnexp measures on a GPU, in one command that fits a 10-minute window:

  1. cuda-tests  `pytest -m cuda`: FlexAttention's backward against eager, the bf16 paths, no host
                 sync in a training step
  2. kernels     scripts/bench/kernels.py: every softmax variant x eager/sdpa/flex x T 128..8192 x
                 head dim 64/128 x causal/bidirectional, bf16, fwd+bwd, against a bare SDPA call
  3. model       scripts/bench/model.py: a GPT-2-small-sized model (T=1024), with and without
                 torch.compile, beside nanoGPT's own GPT in the same loop: tokens/s, MFU, peak memory
  4. overhead    scripts/bench/framework_overhead.py on the GPU: attnexp (lean and default) against a
                 plain PyTorch loop and a bare LightningModule, GPT-2-small-sized on sequences of ~1000
                 tokens, 3 interleaved repeats, then each arm once under torch.profiler (GPU busy share,
                 the longest GPU gaps and what the host did then)
  5. cross-entropy  scripts/bench/cross_entropy.py: the training step's loss at GPT-2's vocabulary against
                 a chunked one under activation checkpointing: same loss, time, the allocator's peak
  6. newsgroups  scripts/studies/newsgroups.py: the preset and larger settings, raw and cleaned posts,
                 against TF-IDF + linear SVM (read from
                 scripts/results/newsgroups_baseline.json, which `--baseline-only` computes on the CPU)
  7. nanogpt-loop  scripts/bench/nanogpt_loop.py: nanoGPT's own train.py loop (transcribed, its loss in its
                 compiled graph) beside attnexp train at GPT-2 small on 20 Newsgroups bytes (T 1024,
                 batch 8, bf16, compiled), each arm one process compiling once, timed fits alternating:
                 tokens/s ratio, MFU of both, GPU busy share, syncs a step, host time a step
  8. text-formation  scripts/studies/text_formation.py on plain text (data.repeat_fraction=0, T 128,
                 20,000 steps a run): does a 2-layer model form induction heads on 20 Newsgroups alone
  8b. text-scale  scripts/studies/text_scale.py: plain text at scale (T 512, 2 layers against 1, seeds side
                 by side), its steps sized from 20 s of measured tokens/s to the part's limit
  8c. flex-long  scripts/bench/kernels.py --backends flex --lengths 4096,8192,16384: the long-sequence rows
  9. finetune    scripts/studies/finetune.py --choose: a real pretrained encoder (--pretrained, default
                 ../shared/models/all-MiniLM-L6-v2) fine-tuned on 20 Newsgroups at its full length (512
                 tokens), three learning rates, the best on validation tested once (raw and cleaned posts)

    python scripts/gpu/suite.py                                   # all parts, ~9 minutes on an H100/H200
    python scripts/gpu/suite.py --parts kernels,model             # some of them (two calls, if need be)
    python scripts/gpu/suite.py --parts newsgroups,finetune --newsgroups-tags preset --pretrained DIR
    python scripts/gpu/suite.py --smoke                           # on the CPU, tiny, ~1 minute: the tests
    python scripts/gpu/suite.py --check-plan                      # does scripts/gpu/window.json fit a window?
    bash scripts/gpu/call.sh 1                                    # a window's call 1 (suite.py --call 1 inside)
    python scripts/gpu/suite.py --rehearse                        # the whole plan on the CPU, tiny, with call.sh

A window runs the calls of scripts/gpu/window.json (`--plan`): each part's `expected_s` is its hard
limit, a part that sizes itself (nanogpt-loop, text-scale, flex-long) is given a budget inside it, every
part writes its result file as it goes, and with `--archive FILE` the call's folder is packed into FILE
again after every part, so a call cut at its limit brings back what finished.

Each part runs in its own process with its own time limit, so one that fails or runs long does not
lose the others. Results go to a folder of the window's own, scripts/results/gpu/<date>_<device>/ (or
--out; an earlier window's files are never overwritten): every part's JSON/Markdown, and
suite.json + suite.md with the device, torch and CUDA versions, the date, and each part's outcome.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "scripts"), str(Path(__file__).resolve().parent)]

from common import markdown_table, provenance  # noqa: E402
from plan import BUDGETED, PARTS, PLAN, budgets, check_plan, load_plan  # noqa: E402,F401  (check_plan: the tests use suite.check_plan)

# GPT-2 small on 20 Newsgroups bytes (data=text), for nanoGPT's own loop beside attnexp's
GPT2_TEXT = ["model=gpt2", "attention=causal", "task=lm", "data=text", "data.max_len=1024", "data.batch_size=8",
             "model.compile=true", "data.limit=2000", "trainer.max_epochs=2", "data.max_eval_windows=64"]
# GPT-2-small-sized training on the synthetic copy task: ~1000-token sequences, the same batches for both arms
GPT2 = ["model=gpt2", "data=synthetic", "data.length=498", "data.max_len=1000", "data.n_symbols=64", "data.n_train=512",
        "data.n_val=64", "data.batch_size=8", "trainer.max_epochs=2", "maps.enabled=false", "test=false"]
NEWSGROUPS = {  # tag: overrides on top of experiment=newsgroups, tried in this order while time lasts
    "preset": [],
    "d256_l4": ["model.d_model=256", "model.n_heads=8", "model.n_layers=4", "trainer.max_epochs=10", "optim.lr=5e-4"],
    "d384_l6_1024": ["model.d_model=384", "model.n_heads=6", "model.n_layers=6", "data.max_len=1024",
                     "trainer.max_epochs=12", "optim.lr=3e-4", "data.batch_size=64"],
}
RUNS_AT_ONCE = max(2, min(6, (os.cpu_count() or 2) // 2))  # text-formation's 6 small runs (one thread each) on the GPU
FINETUNE_RUNS = 6  # finetune.py's three candidates, the chosen one with 2 more seeds, then on cleaned posts;
# each takes ~25 s beyond its training (start, test): at +2.5 min in all the 2026-11-28 window lost the cleaned run
# the SVM baseline as --baseline-only computed it on the CPU (same posts): fitting it again costs ~1 min a setting
BASELINE = f"--baseline-from={REPO / 'scripts' / 'results' / 'newsgroups_baseline.json'}"
PRETRAINED = REPO.parent / "shared" / "models" / "all-MiniLM-L6-v2"


def run(name: str, cmd: list[str], timeout: float, log: Path) -> dict:
    """One part's command within its limit. It runs in a session of its own with a temporary folder of
    its own (TMPDIR): at the limit the whole session is killed (a part's training processes too, which
    would hold the GPU under the next part), and whatever it left in that folder is named (`left_behind`:
    a script that ended should have left nothing) and removed. torch.compile's cache stays shared."""
    t0 = time.perf_counter()
    print(f"== {name}: {' '.join(cmd)}", flush=True)
    inductor = Path(tempfile.gettempdir()) / f"torchinductor_{getpass.getuser()}"  # its default place, before TMPDIR moves
    with tempfile.TemporaryDirectory(prefix="suite-part-", ignore_cleanup_errors=True) as tmp:
        env = {"TORCHINDUCTOR_CACHE_DIR": str(inductor), **os.environ, "PYTHONUNBUFFERED": "1", "PYTHONWARNINGS": "ignore",
               "TMPDIR": tmp}
        with open(log, "w") as sink:  # as it goes: a part killed at its limit leaves what it printed
            p = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT, text=True,
                                 start_new_session=True)
            try:
                p.wait(timeout=timeout)
                status = "ok" if p.returncode == 0 else f"exit {p.returncode}"
            except subprocess.TimeoutExpired:
                status = f"timed out after {timeout:.0f} s"
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)  # what the part started and left running, too
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(timeout=30)
        left = sorted(f.name for f in Path(tmp).iterdir())
    out = log.read_text(errors="replace")
    tail = "\n".join(out.strip().splitlines()[-25:])
    print(f"{tail}\n== {name}: {status} in {time.perf_counter() - t0:.0f} s\n", flush=True)
    return {"status": status, "seconds": round(time.perf_counter() - t0, 1), "log": log.name, "tail": tail[-3000:],
            "left_behind": left}


def arguments() -> tuple[argparse.Namespace, list[str], Path]:
    """The command line, checked: (args, the parts to run, the pretrained folder)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default=None, help=f"comma list of: {', '.join(PARTS)} (default: all; finetune only where "
                                                  f"--pretrained exists)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU (the default test set runs this)")
    ap.add_argument("--out", default=None, help="default: scripts/results/gpu (smoke: scripts/results/gpu_smoke)")
    ap.add_argument("--newsgroups-path", default=None, help="a folder with train/test .jsonl.gz (default: data.path's)")
    ap.add_argument("--newsgroups-minutes", type=float, default=1.5, help="training time limit per setting")
    ap.add_argument("--newsgroups-tags", default=",".join(NEWSGROUPS), help=f"from-scratch settings: {', '.join(NEWSGROUPS)}")
    ap.add_argument("--newsgroups-settings", default="raw,clean", help="raw, clean or both (newsgroups and finetune)")
    ap.add_argument("--pretrained", default=str(PRETRAINED), help="a BERT-family folder for the finetune part")
    ap.add_argument("--finetune-minutes", type=float, default=1.5, help="the fine-tune's training time limit per run")
    ap.add_argument("--kernels-backends", default=None, help="the kernel grid's rows on these backends only, e.g. flex")
    ap.add_argument("--kernels-budget-s", type=int, default=150, help="the kernel grid stops adding rows after this long")
    ap.add_argument("--overhead-arms", default="plain,bare,lean,default", help="the overhead part's arms")
    ap.add_argument("--cuda-tests-k", default=None, help="pytest -k for the cuda-tests part (default: all of them)")
    ap.add_argument("--merge", nargs="+", default=None, metavar="DIR", help="runs nothing: the parts in these folders' "
                    "suite.json (suite processes run at once, each with its own --out) into --out's")
    ap.add_argument("--plan", default=str(PLAN), help="the window plan (scripts/gpu/window.json)")
    ap.add_argument("--check-plan", action="store_true", help="runs nothing: whether the plan fits a window")
    ap.add_argument("--call", type=int, default=None, help="run call N of the plan (call.sh does, on the GPU machine)")
    ap.add_argument("--archive", default=None, help="pack --out into this .tgz after every part")
    ap.add_argument("--rehearse", action="store_true", help="the whole plan on the CPU, tiny, through call.sh; "
                    "then a part cut at its limit (the default test set runs this)")
    ap.add_argument("--nanogpt-repeats", type=int, default=None, help="nanogpt-loop's timed fits of each arm at most")
    args = ap.parse_args()
    if args.merge and not args.out:
        ap.error("--merge: name the window's folder with --out (scripts/results/gpu/<date>_<device>)")
    if args.merge or args.check_plan or args.rehearse:
        return args, [], Path()
    if args.call is not None:
        calls = load_plan(Path(args.plan))["calls"]
        if not 1 <= args.call <= len(calls):
            ap.error(f"--call: the plan has calls 1 to {len(calls)}")
        args.plan_calls = calls
        args.parts = ",".join(p["part"] for p in calls[args.call - 1])
        args.limits = {p["part"]: p["expected_s"] for p in calls[args.call - 1]}
    pretrained = Path(args.pretrained).resolve()
    have_model = (pretrained / "config.json").is_file()
    if args.parts is None and not have_model:
        print(f"gpu/suite.py: no pretrained model at {pretrained}: the finetune part is left out (--pretrained DIR)")
    parts = args.parts.split(",") if args.parts else [p for p in PARTS if p != "finetune" or have_model]
    bad = sorted(set(parts) - set(PARTS))
    if bad:
        ap.error(f"--parts: unknown {bad}; choose from {', '.join(PARTS)}")
    bad = sorted(set(args.newsgroups_tags.split(",")) - set(NEWSGROUPS))
    if bad:
        ap.error(f"--newsgroups-tags: unknown {bad}; choose from {', '.join(NEWSGROUPS)}")
    if "finetune" in parts and not have_model:
        ap.error(f"--pretrained {pretrained}: no config.json there; give a BERT-family folder or leave out the finetune part")
    if not torch.cuda.is_available() and not args.smoke:
        raise SystemExit("gpu/suite.py: no CUDA device here; run it on a GPU machine, or --smoke on the CPU")
    return args, parts, pretrained


def commands(args, out: Path, pretrained: Path) -> dict[str, list[tuple[str, list[str], float, str]]]:
    """part -> its runs, each (name, command, time limit in s, log file name)."""
    py, s = sys.executable, args.smoke
    ng_path = [f"data.path={Path(args.newsgroups_path).resolve()}"] if args.newsgroups_path else []
    settings = "raw" if s else args.newsgroups_settings
    n_settings = len(settings.split(","))
    tiny = ["data.limit=300", "data.vocab_size=2000", "data.max_len=128", "trainer.max_epochs=1"]
    newsgroups = [py, "scripts/studies/newsgroups.py", f"--out={out}", f"--settings={settings}", BASELINE, *ng_path]
    return {
        "cuda-tests": [("cuda-tests", [py, "-m", "pytest", "-m", "cuda", "-q", "-p", "no:cacheprovider", "--durations=10",
                                       *(["-k", "flex_gradients and mha"] if s else ["-k", args.cuda_tests_k] if args.cuda_tests_k
                                         else [])], 90 if s else 150, "cuda-tests.log")],
        "kernels": [("kernels", [py, "scripts/bench/kernels.py", f"--out={out}", *(["--smoke"] if s else
                                 [f"--budget-s={args.kernels_budget_s}"]),
                                 *([f"--backends={args.kernels_backends}", f"--tag=_{args.kernels_backends.replace(',', '_')}"]
                                   if args.kernels_backends else [])],
                     120 if s else args.kernels_budget_s + 60, "kernels.log")],
        "model": [("model", [py, "scripts/bench/model.py", f"--out={out}", *(["--smoke"] if s else ["--sizes=gpt2-small"])],
                   120 if s else 150, "model.log")],
        # the four arms (plain loop, bare LightningModule, attnexp lean and default), interleaved: 3 repeats on a
        # GPU; then each once under the profiler
        "overhead": [("overhead", [py, "scripts/bench/framework_overhead.py", f"--repeats={1 if s else 3}",
                                   "--profile=lean" if s else "--profile",
                                   f"--arms={'plain,bare,lean' if s else args.overhead_arms}", f"--out={out}",
                                   *(["data.n_sentences=300", "trainer.max_epochs=2"] if s else ["--tag=_gpt2", *GPT2])],
                      200 if s else 140 * len(args.overhead_arms.split(",")), "overhead.log")],
        # the training step's loss against a chunked, checkpointed one at GPT-2's vocabulary: time and the allocator's peak
        "cross-entropy": [("cross-entropy", [py, "scripts/bench/cross_entropy.py", f"--out={out}", "--repeats=5",
                                             *(["--smoke"] if s else [])], 120, "cross_entropy.log")],
        "newsgroups": [(f"newsgroups {tag}", [*newsgroups, f"--tag=_{tag}", f"--minutes={0.5 if s else args.newsgroups_minutes}",
                                              *(tiny if s else NEWSGROUPS[tag])],
                        180 if s else 60 * n_settings * (args.newsgroups_minutes + 1.5), f"newsgroups_{tag}.log")
                       for tag in (["preset"] if s else args.newsgroups_tags.split(","))],
        **window_parts(args, out, ng_path),
        # the preset stops at 2 epochs: 9,754 steps at T 128 (the 2026-11-28 window's runs); 5 let --steps decide
        "text-formation": [("text-formation", [py, "scripts/studies/text_formation.py", f"--out={out}", "--tag=_plain",
                                               *(["--smoke"] if s else ["--steps=20000", f"--workers={RUNS_AT_ONCE}",
                                                                          "trainer.max_epochs=5"]),
                                               "data.repeat_fraction=0.0", "data.max_len=128", *ng_path],
                            240 if s else 540, "text_formation.log")],
        # scripts/studies/finetune.py's GRID on raw posts, the best on validation tested once, then on cleaned posts
        "finetune": [("finetune", [py, "scripts/studies/finetune.py", "--choose", f"--out={out}", f"--model={pretrained}",
                                   f"--minutes={0.5 if s else args.finetune_minutes}",
                                   *(["--smoke", "--more-seeds=1"] if s else []),
                                   *([f"--data={Path(args.newsgroups_path).resolve()}"] if args.newsgroups_path else [])],
                      240 if s else 60 * (FINETUNE_RUNS * (args.finetune_minutes + 0.4) + 1.5), "finetune.log")],
    }


def window_parts(args, out: Path, ng_path: list[str]) -> dict[str, list[tuple[str, list[str], float, str]]]:
    """The parts that size themselves to a budget (the window plan's): part -> its runs, as `commands`."""
    py, s, budget = sys.executable, args.smoke, budgets(args)
    return {
        # each arm one process that compiles once; timed fits alternate; the result file after every fit
        "nanogpt-loop": [("nanogpt-loop", [py, "scripts/bench/nanogpt_loop.py", "--arms=nanogpt,attnexp", "--profile",
                                           f"--repeats={args.nanogpt_repeats or (1 if s else 10)}",
                                           f"--budget-s={budget['nanogpt-loop']}", f"--out={out}",
                                           *(["--tag=_smoke", "data=text", "task=lm", "attention=causal", "data.limit=60",
                                              "trainer.max_epochs=2"] if s else ["--tag=_gpt2", *GPT2_TEXT]), *ng_path],
                          budget["nanogpt-loop"] + BUDGETED["nanogpt-loop"], "nanogpt_loop.log")],
        # plain text at scale: 20 s of measured tokens/s size the runs to the part's budget
        "text-scale": [("text-scale", [py, "scripts/studies/text_scale.py", f"--budget-s={budget['text-scale']}", f"--out={out}",
                                       *(["--smoke", "--seeds=1", "--probe-s=5", "--target-tokens=20000", "--margin-s=10"]
                                         if s else []), *ng_path],
                        budget["text-scale"] + BUDGETED["text-scale"], "text_scale.log")],
        # the long-sequence rows: flex against a bare SDPA call (sdpa alone on the CPU: flex trains on CUDA only)
        "flex-long": [("flex-long", [py, "scripts/bench/kernels.py", f"--out={out}", f"--budget-s={budget['flex-long']}",
                                     *(["--backends=sdpa", "--lengths=128,256", "--variants=mha", "--tokens=512",
                                        "--repeats=1", "--tag=_long_smoke"] if s else
                                       ["--backends=flex", "--lengths=4096,8192,16384", "--variants=mha,alibi,sliding_window",
                                        "--tag=_flex_long"])],
                       budget["flex-long"] + BUDGETED["flex-long"], "flex_long.log")],
    }


def default_out(smoke: bool) -> Path:
    """A folder of its own for each GPU window (its date and device), so a later window never overwrites an
    earlier one's files: scripts/results/gpu/2026-11-28_nvidia-h100-80gb-hbm3/."""
    import re

    if smoke:
        return REPO / "scripts" / "results" / "gpu_smoke"
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    slug = re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-")
    return REPO / "scripts" / "results" / "gpu" / f"{datetime.now():%Y-%m-%d}_{slug}"


def merge(folders: list[str], out: Path) -> None:
    """One window's suite.json from several suite processes that ran at once, each into its own folder
    (their part files are copied beside it by whoever brought them back)."""
    metas = [json.loads((Path(f) / "suite.json").read_text()) for f in folders]
    devices = {m["device"] for m in metas}
    if len(devices) != 1:
        raise SystemExit(f"gpu/suite.py --merge: these folders come from different devices ({sorted(devices)})")
    meta = {**metas[0], "parts": {k: v for m in metas for k, v in m["parts"].items()},
            "date": min(m["date"] for m in metas), "made": provenance(),
            "made_by_call": [m.get("made") for m in metas]}
    out.mkdir(parents=True, exist_ok=True)
    write_summary(out, meta)
    print((out / "suite.md").read_text())


def main() -> None:
    args, parts, pretrained = arguments()
    if args.merge:
        return merge(args.merge, Path(args.out).resolve())
    if args.check_plan:
        plan = load_plan(Path(args.plan))
        for i, call in enumerate(plan["calls"], 1):
            print(f"call {i}: " + ", ".join(f"{p['part']} {p['expected_s']:g} s" for p in call) +
                  f" = {sum(p['expected_s'] for p in call):g} s of {plan['call_limit_s']:g}")
        return
    if args.rehearse:
        from rehearse import rehearse

        return rehearse(Path(args.plan), Path(args.out) if args.out else None)
    # stopped from outside (call.sh's limit): the part running now is killed with everything it started (run's finally)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cuda = torch.cuda.is_available()
    out = Path(args.out or default_out(args.smoke)).resolve()
    out.mkdir(parents=True, exist_ok=True)
    meta = {"device": torch.cuda.get_device_name(0) if cuda else f"cpu ({platform.machine()})",
            "torch": torch.__version__, "cuda": torch.version.cuda, "driver": driver_version() if cuda else None,
            "python": platform.python_version(),
            "date": datetime.now().isoformat(timespec="seconds"), "smoke": args.smoke, "parts": {}, "made": provenance()}
    jobs = commands(args, out, pretrained)
    limits = getattr(args, "limits", {})
    for part in parts:
        for name, cmd, limit, log in jobs[part]:
            meta["running"] = part  # what a call cut at its limit was doing
            write_summary(out, meta)
            result = run(name, cmd, limits.get(part, limit), out / log)
            del meta["running"]
            if part == "newsgroups":  # one result per setting tag
                meta["parts"].setdefault("newsgroups", {})[name.split(" ", 1)[1]] = result
            else:
                meta["parts"][part] = result
            write_summary(out, meta)  # after every run: a call cut off at its limit keeps what finished
            if args.archive:
                pack(out, Path(args.archive))
    failed = [n for n, r in meta["parts"].items() if outcome(n, r) != "ok"]
    print((out / "suite.md").read_text())
    sys.exit(1 if failed else 0)


def pack(folder: Path, archive: Path) -> None:
    """`folder` into `archive` (a .tgz), replaced whole: the archive a call brings back is always one
    that was finished."""
    import tarfile

    part = archive.with_name(archive.name + ".part")
    with tarfile.open(part, "w:gz") as tar:
        tar.add(folder, arcname=folder.name)
    part.replace(archive)


def outcome(name: str, r: dict) -> str:
    return r.get("status") if name != "newsgroups" else next((x["status"] for x in r.values() if x["status"] != "ok"), "ok")


def write_summary(out: Path, meta: dict) -> None:
    """suite.json and suite.md. Parts from an earlier call into the same folder on the same device
    (a window split into two calls) are kept beside this call's."""
    old = json.loads((out / "suite.json").read_text()) if (out / "suite.json").is_file() else {}
    if old.get("device") == meta["device"] and old.get("smoke") == meta["smoke"]:
        meta["parts"] = {**{k: v for k, v in old.get("parts", {}).items() if k not in meta["parts"]}, **meta["parts"]}
        meta["calls"] = sorted(set(old.get("calls", [old.get("date")])) | {meta["date"]})
    (out / "suite.json").write_text(json.dumps(meta, indent=2) + "\n")
    lines = [f"# attnexp GPU suite: {meta['device']}", "",
             f"torch {meta['torch']}, CUDA {meta['cuda']}, driver {meta.get('driver')}, Python {meta['python']}, "
             f"{', '.join(meta.get('calls', [meta['date']]))}" + (" (smoke: tiny sizes on the CPU)" if meta["smoke"] else ""),
             "", markdown_table([[f"{name} {tag}".strip(), rr["status"], rr["seconds"]] for name, r in meta["parts"].items()
                                 for tag, rr in (r.items() if name == "newsgroups" else [("", r)])],
                                ["part", "outcome", "seconds"])]
    lines += ["", "Figures: kernels_*.md, model_*.md, framework_overhead_*.json, cross_entropy_*.json, newsgroups_*.md, "
              "finetune_choice_*.md (the pretrained encoder) in this folder."]
    (out / "suite.md").write_text("\n".join(lines) + "\n")


def driver_version() -> str | None:
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                           text=True, timeout=30)
        return r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


if __name__ == "__main__":
    main()
