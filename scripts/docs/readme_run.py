#!/usr/bin/env python
"""The README's first command, run: `python -m attnexp train` with nothing added, in a fresh folder, as
the README's first command runs it after its install. Its wall time and the block it ends with go to
scripts/results/readme_run.json, and README.md's "Where a run goes" block and "the run about N s", and
docs/runs.md's copy of the block, are rewritten from that file (tests/e2e/test_readme.py holds both
pages to it).

    python scripts/docs/readme_run.py              # about 30 s on 2 CPU cores

The run's folder is shown as /home/you/outputs/...: the temporary folder it ran in is replaced.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from common import RESULTS, provenance  # noqa: E402

README = REPO / "README.md"
RUNS = REPO / "docs" / "runs.md"  # shows the same block
FILE = RESULTS / "readme_run.json"
BLOCK = re.compile(r"(A run ends by saying what it did.*?\n\n```\n)(.*?)(\n```)", re.S)
TIME = re.compile(r"the run about \d+ s on 2 CPU cores")


def run() -> dict:
    with tempfile.TemporaryDirectory(prefix="readme-run-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("WANDB", "MLFLOW"))}
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "attnexp", "train"], cwd=tmp, capture_output=True, text=True,
                              timeout=600, env={**env, "PYTHONWARNINGS": "ignore"})
        wall = time.perf_counter() - t0
        if done.returncode != 0:
            raise SystemExit(f"readme_run.py: python -m attnexp train failed:\n{done.stderr[-3000:]}")
        out = (done.stdout + done.stderr).replace(str(Path(tmp).resolve()), "/home/you").replace(tmp, "/home/you")
    start = out.index("attnexp: run completed")
    block = [line for line in out[start:].splitlines() if line.strip()]
    block = block[:1] + [line for line in block[1:] if line.startswith("  ")]
    return {"command": "python -m attnexp train", "wall_s": round(wall, 1), "block": block, "made": provenance()}


def write_readme(result: dict) -> None:
    for page, times in ((README, 1), (RUNS, 0)):
        text = page.read_text()
        text, n = BLOCK.subn(lambda m: m.group(1) + "\n".join(result["block"]) + m.group(3), text)
        text, k = TIME.subn(f"the run about {round(result['wall_s'])} s on 2 CPU cores", text)
        if n != 1 or k != times:
            raise SystemExit(f"readme_run.py: {page.name} no longer has the block or the run's time where this script writes")
        page.write_text(text)


def main() -> None:
    result = run()
    FILE.write_text(json.dumps(result, indent=2) + "\n")
    write_readme(result)
    print("\n".join(result["block"]) + f"\n(wall {result['wall_s']} s; {FILE.relative_to(REPO)}, README.md rewritten)")


if __name__ == "__main__":
    main()
