#!/usr/bin/env python
"""Everything attnexp measures on a GPU, in one command that fits a 10-minute window:

  1. cuda-tests  `pytest -m cuda`: FlexAttention's backward against eager, the bf16 paths, no host
                 sync in a training step
  2. kernels     scripts/bench_kernels.py: every softmax variant x eager/sdpa/flex x T 128..8192 x
                 head dim 64/128 x causal/bidirectional, bf16, fwd+bwd, against a bare SDPA call
  3. model       scripts/bench_model.py: a GPT-2-small-sized model (T=1024) and model=small, with and
                 without torch.compile: tokens/s, MFU, peak memory
  4. overhead    scripts/bench_framework_overhead.py on the GPU: attnexp against a plain PyTorch loop,
                 GPT-2-small-sized on sequences of ~1000 tokens
  5. newsgroups  scripts/bench_newsgroups.py: the preset and larger settings, raw and cleaned posts,
                 against TF-IDF + linear SVM (86.1% raw, 69.7% cleaned)

    python scripts/gpu_suite.py                                   # all parts, ~9 minutes on an H100/H200
    python scripts/gpu_suite.py --parts kernels,model             # some of them (two calls, if need be)
    python scripts/gpu_suite.py --smoke                           # on the CPU, tiny, ~1 minute: the tests

Each part runs in its own process with its own time limit, so one that fails or runs long does not
lose the others. Results go to scripts/results/gpu/ (or --out): every part's JSON/Markdown, and
suite.json + suite.md with the device, torch and CUDA versions, the date, and each part's outcome.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
PARTS = ("cuda-tests", "kernels", "model", "overhead", "newsgroups")
# GPT-2-small-sized training on the synthetic copy task: ~1000-token sequences, the same batches for both arms
GPT2 = ["model=gpt2", "data=synthetic", "data.length=498", "data.max_len=1000", "data.n_symbols=64", "data.n_train=1024",
        "data.n_val=64", "data.batch_size=8", "trainer.max_epochs=2", "maps.enabled=false", "test=false"]
NEWSGROUPS = {  # tag: overrides on top of experiment=newsgroups, tried in this order while time lasts
    "preset": [],
    "d256_l4": ["model.d_model=256", "model.n_heads=8", "model.n_layers=4", "trainer.max_epochs=10", "optim.lr=5e-4"],
    "d384_l6_1024": ["model.d_model=384", "model.n_heads=6", "model.n_layers=6", "data.max_len=1024",
                     "trainer.max_epochs=12", "optim.lr=3e-4", "data.batch_size=64"],
}


def run(name: str, cmd: list[str], timeout: float, log: Path) -> dict:
    t0 = time.perf_counter()
    print(f"== {name}: {' '.join(cmd)}", flush=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONWARNINGS": "ignore"}
    try:
        r = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
        status, out = ("ok" if r.returncode == 0 else f"exit {r.returncode}"), r.stdout + r.stderr
    except subprocess.TimeoutExpired as e:
        status = f"timed out after {timeout:.0f} s"
        out = (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(errors="replace")
    log.write_text(out)
    tail = "\n".join(out.strip().splitlines()[-25:])
    print(f"{tail}\n== {name}: {status} in {time.perf_counter() - t0:.0f} s\n", flush=True)
    return {"status": status, "seconds": round(time.perf_counter() - t0, 1), "log": log.name, "tail": tail[-3000:]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default=",".join(PARTS))
    ap.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU (the default test set runs this)")
    ap.add_argument("--out", default=None, help="default: scripts/results/gpu (smoke: scripts/results/gpu_smoke)")
    ap.add_argument("--newsgroups-path", default=None, help="a folder with train/test .jsonl.gz (default: data.path's)")
    ap.add_argument("--newsgroups-minutes", type=float, default=1.5, help="training time limit per setting")
    args = ap.parse_args()
    parts = args.parts.split(",")
    bad = sorted(set(parts) - set(PARTS))
    if bad:
        ap.error(f"--parts: unknown {bad}; choose from {', '.join(PARTS)}")
    cuda = torch.cuda.is_available()
    if not cuda and not args.smoke:
        raise SystemExit("gpu_suite.py: no CUDA device here; run it on a GPU machine, or --smoke on the CPU")
    out = Path(args.out or REPO / "scripts" / "results" / ("gpu_smoke" if args.smoke else "gpu")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    ng_path = [f"data.path={Path(args.newsgroups_path).resolve()}"] if args.newsgroups_path else []
    meta = {"device": torch.cuda.get_device_name(0) if cuda else f"cpu ({platform.machine()})",
            "torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
            "date": datetime.now().isoformat(timespec="seconds"), "smoke": args.smoke, "parts": {}}
    s = args.smoke
    jobs = {
        "cuda-tests": ([py, "-m", "pytest", "-m", "cuda", "-q", "-p", "no:cacheprovider", "--durations=10",
                        *(["-k", "flex_gradients and fused"] if s else [])], 90 if s else 150),
        "kernels": ([py, "scripts/bench_kernels.py", f"--out={out}", *(["--smoke"] if s else ["--budget-s=150"])],
                    120 if s else 200),
        "model": ([py, "scripts/bench_model.py", f"--out={out}", *(["--smoke"] if s else [])], 120 if s else 150),
        "overhead": ([py, "scripts/bench_framework_overhead.py", "--repeats=1", "--arms=plain,lean", f"--out={out}",
                      *(["data.n_sentences=300", "trainer.max_epochs=1"] if s else ["--tag=_gpt2", *GPT2])],
                     150 if s else 150),
    }
    for name in parts:
        if name == "newsgroups":
            settings = {"preset": []} if s else NEWSGROUPS
            results = {}
            for tag, ov in settings.items():
                extra = ["data.limit=300", "data.vocab_size=2000", "data.max_len=128", "trainer.max_epochs=1"] if s else ov
                results[tag] = run(f"newsgroups {tag}", [py, "scripts/bench_newsgroups.py", f"--out={out}", f"--tag=_{tag}",
                                                         f"--minutes={0.5 if s else args.newsgroups_minutes}",
                                                         *(["--settings=raw"] if s else []), *ng_path, *extra],
                                   180 if s else 60 * (2 * args.newsgroups_minutes + 1.5), out / f"newsgroups_{tag}.log")
            meta["parts"]["newsgroups"] = results
            continue
        cmd, limit = jobs[name]
        meta["parts"][name] = run(name, cmd, limit, out / f"{name}.log")
    (out / "suite.json").write_text(json.dumps(meta, indent=2) + "\n")
    lines = [f"# attnexp GPU suite: {meta['device']}", "",
             f"torch {meta['torch']}, CUDA {meta['cuda']}, Python {meta['python']}, {meta['date']}"
             + (" (smoke: tiny sizes on the CPU)" if s else ""), "", "| part | outcome | seconds |", "| --- | --- | --- |"]
    for name, r in meta["parts"].items():
        for tag, rr in (r.items() if name == "newsgroups" else [("", r)]):
            lines.append(f"| {name} {tag} | {rr['status']} | {rr['seconds']} |")
    lines += ["", "Figures: kernels_*.md, model_*.md, framework_overhead_*.json, newsgroups_*.md in this folder."]
    (out / "suite.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    failed = [n for n, r in meta["parts"].items() if (r.get("status") if n != "newsgroups" else
                                                        next((x["status"] for x in r.values() if x["status"] != "ok"), "ok")) != "ok"]
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
