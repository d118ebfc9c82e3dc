#!/usr/bin/env python
"""Start-up: from `python -m attnexp train` to the first training step (summary.json's startup_s,
measured from the top of attnexp/__main__.py), for the README's default run, each in a fresh
process; and how long `import attnexp.training.fit` alone takes (Lightning, torch, torchmetrics).

    python scripts/bench/startup.py --repeats 5
    python scripts/bench/startup.py --repeats 7 --against 47c2e01

`--against REV` times that commit's code beside this checkout's in the same run, the two arms
taking turns (a git worktree of REV, first on PYTHONPATH), and writes
scripts/results/startup_cpu_against.json with each arm's times and the ratio of their medians: this
machine is shared and noisy, so a change in start-up is a ratio measured together, not two files.
It also times, in this process, the composition a run no longer makes (Hydra.get_mode), which is
smaller than the start-up's own noise.

What is installed matters: torchmetrics imports scipy.signal when scipy is there (scikit-learn
brings it: the `newsgroups` extra) and transformers when that is there (the `test` extra). The
result file says which were. Writes scripts/results/startup_cpu.json.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--tag", default="")
    ap.add_argument("--against", metavar="REV", help="time that commit's start-up beside this checkout's")
    args = ap.parse_args()
    if args.against:
        return against(args.against, args.repeats)
    startup, imports = [], []
    for i in range(args.repeats):
        startup.append(first_step())
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import attnexp.training.fit"], check=True)
        imports.append(round(time.perf_counter() - t0, 2))
        print(f"repeat {i}: first step after {startup[-1]:.2f} s; import attnexp.training.fit {imports[-1]:.2f} s", flush=True)
    present = {m: importlib.util.find_spec(m) is not None for m in ("scipy", "sklearn", "transformers")}
    result = {"startup_s": startup, "median_startup_s": statistics.median(startup), "import_train_s": imports,
              "median_import_train_s": statistics.median(imports), "installed": present}
    out = REPO / "scripts" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"startup_cpu{args.tag}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nmedian of {args.repeats}: first training step after {result['median_startup_s']:.2f} s "
          f"(import attnexp.training.fit {result['median_import_train_s']:.2f} s); installed: {present}")


def first_step(env: dict | None = None) -> float:
    """Seconds from `python -m attnexp train` to the first training step, in a fresh process and folder."""
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([sys.executable, "-m", "attnexp", "train", "trainer.max_steps=1", "test=false",
                        f"hydra.run.dir={d}/run"], cwd=d, check=True, capture_output=True, env=env)
        return json.loads(Path(d, "run", "summary.json").read_text())["startup_s"]


def against(rev: str, repeats: int) -> None:
    import os

    sys.path.insert(0, str(REPO / "scripts"))
    from common import provenance

    with tempfile.TemporaryDirectory() as d:
        tree = Path(d) / "tree"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), rev], check=True,
                       capture_output=True)
        try:
            env = {**os.environ, "PYTHONPATH": str(tree)}
            here = {**os.environ, "PYTHONPATH": str(REPO)}
            code = subprocess.run([sys.executable, "-c", "import attnexp; print(attnexp.__file__)"], env=env, cwd=d,
                                  capture_output=True, text=True, check=True).stdout.strip()
            assert code.startswith(str(tree)), f"the {rev} arm imported {code}"
            times = {"this": [], rev: []}
            first_step(here), first_step(env)  # the disk cache warm for both arms alike
            for i in range(repeats):
                for arm in ((rev, "this") if i % 2 else ("this", rev)):
                    times[arm].append(first_step(here if arm == "this" else env))
                print(f"repeat {i}: this {times['this'][-1]:.2f} s, {rev} {times[rev][-1]:.2f} s", flush=True)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], capture_output=True)
    medians = {arm: statistics.median(t) for arm, t in times.items()}
    result = {"startup_s": times, "median_startup_s": medians, "ratio_this_to_against": medians["this"] / medians[rev],
              "against": rev, "get_mode_s": get_mode_seconds(), "made": provenance()}
    out = REPO / "scripts" / "results" / "startup_cpu_against.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nmedian of {repeats}: this checkout {medians['this']:.2f} s, {rev} {medians[rev]:.2f} s "
          f"(ratio {result['ratio_this_to_against']:.3f}); Hydra.get_mode's composition "
          f"{statistics.median(result['get_mode_s']):.3f} s warm -> {out}")


def get_mode_seconds(repeats: int = 10) -> list[float]:
    """The composition @hydra.main makes only to read hydra.mode (Hydra.get_mode) of the default config,
    timed in this process after a first warm-up call: what one composition fewer saves a run."""
    from hydra._internal.hydra import Hydra

    from attnexp.compat.hydra import config_search_path
    from attnexp.config.paths import conf_dir
    from attnexp.launch.compose import register_schemas

    register_schemas()
    hydra = Hydra.create_main_hydra2(task_name="train", config_search_path=config_search_path(str(conf_dir())))
    times = []
    for _ in range(repeats + 1):
        t0 = time.perf_counter()
        hydra.get_mode(config_name="config", overrides=[])
        times.append(round(time.perf_counter() - t0, 4))
    return times[1:]


if __name__ == "__main__":
    main()
