#!/usr/bin/env python
"""Start-up: from `python -m attnexp train` to the first training step (summary.json's startup_s,
measured from the top of attnexp/__main__.py), for the README's default run, each in a fresh
process; and how long `import attnexp.training.fit` alone takes (Lightning, torch, torchmetrics).

    python scripts/bench/startup.py --repeats 5

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
    args = ap.parse_args()
    startup, imports = [], []
    for i in range(args.repeats):
        with tempfile.TemporaryDirectory() as d:
            subprocess.run([sys.executable, "-m", "attnexp", "train", "trainer.max_steps=1", "test=false",
                            f"hydra.run.dir={d}/run"], cwd=d, check=True, capture_output=True)
            startup.append(json.loads(Path(d, "run", "summary.json").read_text())["startup_s"])
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


if __name__ == "__main__":
    main()
