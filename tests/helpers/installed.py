"""attnexp as a user installs it: a wheel built from this checkout, installed into a throwaway venv
that borrows the test venv's dependencies (a .pth file, so nothing is downloaded), and commands run
in a folder that is not the checkout."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from helpers.runs import REPO


def build_wheel(out: Path) -> Path:
    """`pip wheel --no-deps` of the checkout (without build isolation where setuptools is new enough)."""
    try:
        import setuptools

        isolation = [] if int(setuptools.__version__.split(".")[0]) < 68 else ["--no-build-isolation"]
    except ImportError:
        isolation = []
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *isolation, "-w", str(out), str(REPO)],
                   check=True, capture_output=True, text=True)
    return next(out.glob("attnexp-*.whl"))


def venv_with(where: Path, *installs: str) -> Path:
    """A venv at `where` that sees the test venv's packages after its own, with `installs` pip-installed
    into it (no dependencies fetched); its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    py = where / "bin" / "python"
    own = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], check=True,
                         capture_output=True, text=True).stdout.strip()
    Path(own, "_attnexp_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    for target in installs:  # the test venv's pip, installing into the new venv's site-packages
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        "--target", own, target], check=True, capture_output=True, text=True)
    return py


def run(py: Path, *args: str, cwd: Path, timeout: float = 300, env: dict | None = None):
    """`python -m attnexp ARGS` with `py`, from `cwd`, with nothing of the checkout on the path."""
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([str(py), "-m", "attnexp", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**clean, "PYTHONWARNINGS": "ignore", **(env or {})})


# Another project's Hydra app, as LHT's tests and any `@hydra.main` script start: Hydra scans every
# `hydra_plugins` package it can import (attnexp's among them) before the app's first line runs.
OTHER_APP = '''
import sys
import hydra
from hydra import compose, initialize_config_dir
from hydra.core.plugins import Plugins
from hydra.plugins.sweeper import Sweeper


@hydra.main(version_base="1.3", config_path=None)
def main(cfg):
    print("app ran")


if sys.argv[1] == "main":
    sys.argv[1:] = []
    main()
else:
    with initialize_config_dir(version_base="1.3", config_dir=sys.argv[2]):
        cfg = compose(config_name="config", overrides=["hydra/sweeper=attnexp_optuna"], return_hydra_config=True)
    print("composed", cfg.lr, cfg.hydra.sweeper._target_)
    print("sweepers", " ".join(sorted(c.__name__ for c in Plugins.instance().discover(Sweeper))))
'''


def other_hydra_app(py: Path, where: Path) -> list[str]:
    """Run OTHER_APP with `py` from `where` (outside the checkout), as `@hydra.main` and as a
    `compose` call, each in a fresh process with nothing of the checkout on the path; its printed
    lines (an assertion with the traceback where either fails)."""
    (where / "conf").mkdir(parents=True, exist_ok=True)
    (where / "conf" / "config.yaml").write_text("lr: 0.1\n")
    (where / "other_app.py").write_text(OTHER_APP)
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    lines = []
    for how in (["main", f"hydra.run.dir={where / 'out'}"], ["compose", str(where / "conf")]):
        done = subprocess.run([str(py), "other_app.py", *how], cwd=where, capture_output=True, text=True,
                              timeout=120, env=clean)
        assert done.returncode == 0, done.stderr[-3000:]
        lines += done.stdout.splitlines()
    return lines
