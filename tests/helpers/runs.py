"""Where things are, and runs composed exactly as `python -m attnexp train` composes them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from attnexp.api import compose, load_run
from attnexp.config.paths import conf_dir

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"  # ../shared beside the repo: the real 20 Newsgroups and the pretrained model
CONF = conf_dir()
compose_cfg = compose


def options(group: str) -> list[str]:
    """The options of a config group (conf/<group>/*.yaml)."""
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def strict_json(path: Path) -> dict:
    """A summary.json as strict JSON (NaN or Infinity in it fail)."""
    def refuse(c):
        raise ValueError(f"{path} holds {c}: not strict JSON")
    return json.loads(path.read_text(), parse_constant=refuse)


def run_of(overrides: list[str], out_dir="unused"):
    """The validated Run that `attnexp train OVERRIDES` would train into `out_dir`."""
    return load_run(compose(overrides, out_dir))


def stale_last_checkpoints(root: Path) -> list[str]:
    """Completed runs under `root` whose checkpoints/last.ckpt is not at the run's last step."""

    import torch

    stale = []
    from attnexp.results import summary

    for s_path in Path(root).rglob("summary.json"):
        last = s_path.parent / "checkpoints" / "last.ckpt"
        try:  # the checked reader: a test may plant a pipe, a 2 GB file or a 100,000-deep record there
            s = summary.read(s_path)
        except summary.SummaryError:
            continue
        if not isinstance(s, dict) or s.get("status") != "completed" or not last.is_file():
            continue
        step = torch.load(last, map_location="cpu", weights_only=True, mmap=True).get("global_step")
        if step != s.get("steps"):
            stale.append(f"{last}: step {step}, the run's {s.get('steps')}")
    return stale


def attnexp(*args: str, cwd, timeout: float = 300):
    """`python -m attnexp ARGS` in a subprocess, as a user runs it (tests/ on PYTHONPATH, so
    +callbacks.x._target_=helpers.killers.KillAt resolves): the CompletedProcess."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), str(REPO)])}
    return subprocess.run([sys.executable, "-m", "attnexp", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def own_tmp(tmp_path_factory) -> tuple[dict, Path]:
    """An environment whose temporary folder (TMPDIR) is an empty one of the test's, and that folder:
    what a script leaves in /tmp shows there. A short path (pytest's base folder, then t<N>): Chromium's
    socket in TMPDIR must fit a Unix socket's 108 characters."""
    tmp = tmp_path_factory.mktemp("t")
    return {**os.environ, "TMPDIR": str(tmp)}, tmp


# one folder a tool keeps in the temporary folder for every run of it, not one a run: torch.compile's
# cache, and TensorBoard's list of its running servers (each removes its own entry when stopped)
TOOLS_OWN = ("torchinductor_", ".tensorboard-info")


def left_behind(tmp: Path) -> list[str]:
    """What runs left in a test's temporary folder (own_tmp), with each entry's size in MB."""
    def mb(p: Path) -> float:
        return sum(f.stat().st_size for f in ([p] if p.is_file() else p.rglob("*")) if f.is_file()) / 1e6
    return [f"{p.name} ({mb(p):.1f} MB)" for p in sorted(tmp.iterdir())
            if not p.name.startswith(TOOLS_OWN) or (p.name == ".tensorboard-info" and any(p.iterdir()))]  # a server left
