"""The wheel and the sdist ship only what the repository tracks (issue 49). Before: setup.py copied
all of conf/ but local/, so a checkout's conf/.env and a private conf/experiment/mine.yaml holding an
API key entered every wheel built there."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile

import pytest

from helpers.runs import REPO

PLANTED = {"conf/.env": "WANDB_API_KEY=planted-key\n", "conf/experiment/mine.yaml": "# api_key: planted-key\nseed: 1\n",
           "conf/local/default.yaml": "# @package _global_\nseed: 2\n", "conf/attention/.hidden.yaml": "name: causal\n",
           # issue 67 item 8 and 68 item 7: untracked code in every package folder, and a module an earlier
           # build left in build/lib after it was deleted
           "attnexp/planted_module.py": "KEY = 'planted-key'\n", "attnexp/maps/vendor/planted.js": "// planted\n",
           "attnexp/heads/planted.py": "", "hydra_plugins/planted_pkg/__init__.py": "raise SystemExit('planted')\n",
           "build/lib/attnexp/stale_module.py": "# deleted since the last build\n"}


@pytest.fixture(scope="module")
def planted_checkout(tmp_path_factory):
    if subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("needs the checkout's git history (a fresh clone has it)")
    pytest.importorskip("setuptools")
    where = tmp_path_factory.mktemp("checkout") / "attnexp"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{REPO}", str(where)], check=True, capture_output=True)
    for name in ("setup.py", "MANIFEST.in"):  # the build files as this tree has them (committed or not)
        (where / name).write_text((REPO / name).read_text())
    for name, text in PLANTED.items():
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(text)
    return where


def shipped_conf(names: list[str]) -> set[str]:
    return {n.split("conf/", 1)[1] for n in names if "conf/" in n and not n.endswith("/")}


def test_a_wheel_and_an_sdist_ship_only_the_tracked_configs(planted_checkout, tmp_path):
    tracked = set(subprocess.run(["git", "ls-files", "conf"], cwd=planted_checkout, capture_output=True, text=True,
                                 check=True).stdout.split())
    want = {t.split("conf/", 1)[1] for t in tracked}
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path),
                    str(planted_checkout)], check=True, capture_output=True, text=True)
    wheel = next(tmp_path.glob("attnexp-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    in_wheel = shipped_conf([n for n in names if n.startswith("attnexp/conf/")])
    assert in_wheel == want, sorted(in_wheel ^ want)
    code_tracked = set(subprocess.run(["git", "ls-files", "attnexp", "hydra_plugins"], cwd=planted_checkout,
                                      capture_output=True, text=True, check=True).stdout.split())
    code = {n for n in names if n.split("/")[0] in ("attnexp", "hydra_plugins") and not n.startswith("attnexp/conf/")}
    assert code <= code_tracked, sorted(code - code_tracked)
    assert {"attnexp/__init__.py", "attnexp/maps/viewer.html"} <= code and any("vendor/" in n for n in code)

    code = f"from setuptools import build_meta; print(build_meta.build_sdist({str(tmp_path)!r}))"
    name = subprocess.run([sys.executable, "-c", code], cwd=planted_checkout, check=True, capture_output=True,
                          text=True).stdout.split()[-1]
    with tarfile.open(tmp_path / name) as tar:
        members = [m.name.split("/", 1)[1] for m in tar.getmembers() if m.isfile()]
    in_sdist = shipped_conf(members)
    assert in_sdist == want, sorted(in_sdist ^ want)
    planted_code = {n for n in PLANTED if not n.startswith(("conf/", "build/"))}
    assert not planted_code & set(members), sorted(planted_code & set(members))
