#!/usr/bin/env python
"""The lock: exact versions of everything attnexp's tests and docs install, as a constraints file
plain pip reads (requirements/lock.txt), made as a freeze of an environment built from scratch with
the newest releases pyproject's ranges admit. pip-tools and uv would resolve without installing,
but neither sees this machine's CPU torch wheel (pip does), so they would lock a CUDA build; a freeze
of what installed is what the tests then ran on.

    python scripts/lock.py make      # rebuild requirements/lock.txt (a fresh venv; about 4 minutes)
    python scripts/lock.py check     # whether this Python can install from the lock, in one line
    python scripts/lock.py drift     # newest releases, no lock: default tests and the docs build, and what moved

Install from it (README, .ci/run): pip install torch==2.13.0 && pip install -c requirements/lock.txt -e '.[test]'.
torch is left out of the lock on purpose: you install the wheel for your hardware first."""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import tempfile
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "requirements" / "lock.txt"
EXTRAS = "test,docs,sweep,mlflow,cluster,hf,notebook,explain,newsgroups,timeline,llc"
TORCH = "torch==2.13.0"  # the CPU wheel on this machine's disk; a GPU machine installs its own first
# your hardware's, or ours: these names exactly (torchmetrics, torch's prefix, was left unpinned), and two families
LEFT_OUT = {"torch", "attnexp", "pip", "setuptools", "wheel"}
LEFT_OUT_FAMILIES = ("nvidia-", "triton")


def venv(where: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    py = where / "bin" / "python"
    subprocess.run([py, "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    subprocess.run([py, "-m", "pip", "install", "-q", TORCH], check=True)
    return py


def freeze(py: Path) -> list[str]:
    out = subprocess.run([py, "-m", "pip", "freeze", "--exclude-editable"], check=True, capture_output=True, text=True)
    return sorted((line for line in out.stdout.splitlines()
                   if "==" in line and line.split("==")[0].lower() not in LEFT_OUT
                   and not line.lower().startswith(LEFT_OUT_FAMILIES)), key=str.lower)


def header() -> list[str]:
    return [f"# attnexp's lock: made {date.today()} by `python scripts/lock.py make` on Python "
            f"{platform.python_version()} ({platform.system()} {platform.machine()}).",
            f"# python {platform.python_version_tuple()[0]}.{platform.python_version_tuple()[1]}",
            "# Constraints for pip (-c): pip install torch==2.13.0 && pip install -c requirements/lock.txt -e '.[test]'",
            "# torch is not in it: install the wheel for your hardware first. Regenerate after changing a dependency."]


def make() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        py = venv(Path(tmp) / "venv")
        subprocess.run([py, "-m", "pip", "install", "-q", "-e", f".[{EXTRAS}]"], cwd=REPO, check=True)
        pins = freeze(py)
    LOCK.parent.mkdir(exist_ok=True)
    LOCK.write_text("\n".join([*header(), *pins]) + "\n")
    print(f"wrote {LOCK.relative_to(REPO)}: {len(pins)} pins")
    return 0


def locked_python() -> str:
    for line in LOCK.read_text().splitlines():
        if line.startswith("# python "):
            return line.split()[-1]
    return "?"


def check() -> int:
    """One line: the lock was made for another Python (its wheels may not exist for this one)."""
    if not LOCK.is_file():
        print(f"attnexp: no lock at {LOCK.relative_to(REPO)}; make it with python scripts/lock.py make", file=sys.stderr)
        return 1
    want, have = locked_python(), "{}.{}".format(*sys.version_info[:2])
    if want != have:
        print(f"attnexp: requirements/lock.txt was made for Python {want}, this is {have}; use Python {want}, or "
              f"regenerate it for this one with python scripts/lock.py make (or install without -c requirements/lock.txt)",
              file=sys.stderr)
        return 1
    print(f"requirements/lock.txt fits this Python ({have})")
    return 0


def drift() -> int:
    """The newest releases (no lock), the default tests and the docs build on them, and every pin
    that moved. Informational: exits 0 whatever the tests did, and says what they did."""
    locked = dict(line.split("==", 1) for line in LOCK.read_text().splitlines() if "==" in line and not line.startswith("#"))
    with tempfile.TemporaryDirectory() as tmp:
        py = venv(Path(tmp) / "venv")
        subprocess.run([py, "-m", "pip", "install", "-q", "-e", f".[{EXTRAS}]"], cwd=REPO, check=True)
        newest = dict(line.split("==", 1) for line in freeze(py))
        tests = subprocess.run([py, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider"], cwd=REPO).returncode
        docs = subprocess.run([Path(tmp) / "venv" / "bin" / "mkdocs", "build", "--strict", "--site-dir",
                               str(Path(tmp) / "site")], cwd=REPO).returncode
    moved = [f"  {k}: {locked.get(k, '-')} -> {newest.get(k, '-')}" for k in sorted(set(locked) | set(newest), key=str.lower)
             if locked.get(k) != newest.get(k)]
    print(f"drift: {len(moved)} pin(s) moved since the lock", *moved, sep="\n")
    print(f"drift: default tests {'passed' if tests == 0 else f'FAILED (pytest exit {tests})'}; "
          f"docs build {'passed' if docs == 0 else 'FAILED'}; refresh with python scripts/lock.py make")
    return 0


if __name__ == "__main__":
    verb = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    verb.add_argument("verb", choices=["make", "check", "drift"])
    sys.exit({"make": make, "check": check, "drift": drift}[verb.parse_args().verb]())
