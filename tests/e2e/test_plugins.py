"""Extension without forking: another package adds an attention variant and a data set through the
entry-point groups `attnexp.attention` and `attnexp.data` (attnexp/config/plugins.py). Before them,
the registries imported only attnexp's own folders: a variant had to be a file inside attnexp."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import installed
from helpers.tests_data import COUNTING_MODULE, halved_variant

VARIANT = halved_variant("throwaway_halved", "queries halved before the scores (a plugin package's variant)")

PYPROJECT = '''
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "attnexp-throwaway-plugin"
version = "0.1"

[project.entry-points."attnexp.attention"]
halved = "attnexp_throwaway_plugin.variants"

[project.entry-points."attnexp.data"]
counting = "attnexp_throwaway_plugin.data"

[tool.setuptools]
packages = ["attnexp_throwaway_plugin"]
'''


def plugin_package(root: Path) -> Path:
    src = root / "plugin"
    pkg = src / "attnexp_throwaway_plugin"
    pkg.mkdir(parents=True)
    (src / "pyproject.toml").write_text(PYPROJECT)
    (pkg / "__init__.py").write_text("")
    (pkg / "variants.py").write_text(VARIANT)
    (pkg / "data.py").write_text(COUNTING_MODULE)
    return src


@pytest.mark.slow
def test_an_installed_package_adds_a_variant_and_a_data_set(tmp_path):
    """A real `pip install` of a folder with a pyproject; with no yaml of its own, `attention=NAME`
    and `data=NAME` compose, are listed by --help, validate, train, and compare names the variant."""
    py = installed.venv_with(tmp_path / "venv", str(installed.build_wheel(tmp_path / "wheel")),
                             str(plugin_package(tmp_path)))
    work = tmp_path / "work"
    work.mkdir()
    helped = installed.run(py, "train", "--help", cwd=work)
    assert helped.returncode == 0, helped.stderr[-2000:]
    groups = dict(line.split(": ", 1) for line in helped.stdout.splitlines() if line.startswith(("attention: ", "data: ")))
    assert "throwaway_halved" in groups["attention"] and "throwaway_counting" in groups["data"]

    bad = installed.run(py, "train", "data=throwaway_counting", "data.length=30", cwd=work)
    assert bad.returncode == 2 and "data.length=30 needs 32 tokens" in bad.stderr  # the plugin's own check

    done = installed.run(py, "train", "attention=throwaway_halved", "data=throwaway_counting", "trainer.max_epochs=3",
                         "optim.lr=3e-3", "logger=none", "trainer.enable_progress_bar=false", "maps.animation=false",
                         cwd=work)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = next((work / "outputs").glob("*/*/summary.json"))
    s = json.loads(summary.read_text())
    assert s["status"] == "completed" and s["metrics"]["history"][-1]["val/acc"] > 0.5
    assert "throwaway_halved" in installed.run(py, "compare", str(summary.parent), cwd=work).stdout
    listed = installed.run(py, "variants", cwd=work)
    assert "throwaway_halved" in listed.stdout


def test_a_broken_plugin_is_one_line_and_attnexp_still_works(tmp_path):
    """A package whose entry point fails to import: one line naming it, its error and the fix, and
    every built-in variant still composes (here a plugin that is only metadata and a bad module)."""
    site = tmp_path / "site"
    dist = site / "broken_plugin-0.3.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.3\n")
    (dist / "entry_points.txt").write_text("[attnexp.attention]\nbroken = broken_plugin_module\n")
    (site / "broken_plugin_module.py").write_text("import not_a_module_anywhere\n")
    from helpers.runs import REPO

    done = subprocess.run([sys.executable, "-m", "attnexp", "train", "attention=rotary", "--cfg", "job"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{site}:{REPO}", "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-2000:]
    said = [line for line in done.stderr.splitlines() if "broken" in line]
    assert len(said) == 1, done.stderr
    assert ("plugin 'broken' (attnexp.attention = broken_plugin_module, from broken-plugin 0.3) failed to load: "
            "ModuleNotFoundError: No module named 'not_a_module_anywhere'; fix it or pip uninstall broken-plugin") in said[0]
    assert "Traceback" not in done.stderr and "name: rotary" in done.stdout


def metadata_plugin(site: Path, dist_name: str, module: str, code: str) -> None:
    dist = site / f"{dist_name.replace('-', '_')}-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist_name}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[attnexp.attention]\n{module} = {module}\n")
    (site / f"{module}.py").write_text(code)


CLAIMS = '''
from attnexp.attention.registry import register
from attnexp.attention.variants.mha import MultiHead


@register
class Fused(MultiHead):
    name = "fused"  # the alias attnexp's mha keeps for its old checkpoints
    summary = "a stranger's variant under attnexp's alias"
'''


@pytest.mark.parametrize("kind", ["exits", "claims_an_alias"])
def test_a_plugin_that_exits_or_claims_a_builtin_name_is_one_line_and_the_command_runs(tmp_path, kind):
    """Issue 49. Before: a plugin whose import raised SystemExit(0) ended `attnexp train` with exit 0,
    no output and no run (plugins.load caught Exception only); a plugin variant named after a built-in's
    alias was listed and never ran (the alias resolved to the built-in)."""
    from helpers.runs import REPO

    site = tmp_path / "site"
    site.mkdir()
    code = "raise SystemExit(0)\n" if kind == "exits" else CLAIMS
    metadata_plugin(site, f"plugin-{kind.replace('_', '-')}", f"plugin_{kind}", code)
    done = subprocess.run([sys.executable, "-m", "attnexp", "train", "attention=rotary", "--cfg", "job"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{site}:{REPO}", "HOME": str(tmp_path)})
    assert done.returncode == 0 and "name: rotary" in done.stdout, done.stderr[-2000:]
    said = [line for line in done.stderr.splitlines() if f"plugin_{kind}" in line]
    assert len(said) == 1 and "Traceback" not in done.stderr, done.stderr
    assert {"exits": "failed to load: SystemExit: 0", "claims_an_alias": "takes the name of 'mha''s alias"}[kind] in said[0]
    listed = subprocess.run([sys.executable, "-m", "attnexp", "variants"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{site}:{REPO}", "HOME": str(tmp_path)})
    assert listed.returncode == 0 and "a stranger's variant" not in listed.stdout


LISTED = '''
from attnexp.attention.registry import register
from attnexp.attention.variants.mha import MultiHead


@register
class Listed(MultiHead):
    name = "throwaway_listed"
    summary = "a plugin's variant, listed"
'''


def test_attnexp_variants_lists_a_plugins_variant_with_its_package(tmp_path):
    """Issue 50. Before: plugin variants trained and showed in --help and compare but were missing from
    `attnexp variants`' table (its rows came from conf/attention/ only)."""
    from helpers.runs import REPO

    site = tmp_path / "site"
    site.mkdir()
    metadata_plugin(site, "plugin-listed", "plugin_listed", LISTED)
    listed = subprocess.run([sys.executable, "-m", "attnexp", "variants"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{site}:{REPO}", "HOME": str(tmp_path)})
    assert listed.returncode == 0, listed.stderr[-2000:]
    row = next((line for line in listed.stdout.splitlines() if line.startswith("throwaway_listed ")), None)
    assert row is not None and "(plugin: plugin-listed 0.1)" in row, listed.stdout
