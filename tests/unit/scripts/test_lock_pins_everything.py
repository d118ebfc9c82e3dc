"""The lock pins every installed distribution (issue 50). Before: scripts/lock.py left out every name
starting with "torch", so torchmetrics (Lightning's dependency) was installed unpinned."""

from __future__ import annotations

import importlib.util
import re
import sysconfig
from importlib.metadata import distributions

from helpers.runs import REPO


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_installed_distribution_is_in_the_lock():
    spec = importlib.util.spec_from_file_location("lock_script", REPO / "scripts" / "lock.py")
    lock_script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lock_script)
    pinned = {norm(line.split("==")[0]) for line in (REPO / "requirements" / "lock.txt").read_text().splitlines()
              if "==" in line and not line.startswith("#")}
    # what pip installed into this venv (an imported setuptools puts its own vendored copies on sys.path)
    site = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    installed = {norm(d.metadata["Name"]) for d in distributions(path=site) if d.metadata["Name"]}
    left = {n for n in installed if n in lock_script.LEFT_OUT or n.startswith(lock_script.LEFT_OUT_FAMILIES)}
    assert "torchmetrics" in pinned
    assert not installed - pinned - left, sorted(installed - pinned - left)
