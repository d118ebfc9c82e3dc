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
