"""The one thing pyproject.toml cannot say: conf/ (the top-level folder you edit, and the one the
docs name) ships inside the wheel as attnexp/conf/, so an installed attnexp composes its configs
from site-packages. setuptools' package-data only takes files under a package, and a package-dir
mapping would need every conf/ subfolder listed as a package; copying at build time keeps one
source of truth. conf_dir() (attnexp/launch/compose.py) reads the packaged copy, else the checkout's."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

CONF = Path(__file__).resolve().parent / "conf"


class BuildWithConf(build_py):
    def run(self):
        super().run()
        if self.editable_mode:  # an editable install reads the checkout's conf/ itself
            return
        target = Path(self.build_lib) / "attnexp" / "conf"
        shutil.rmtree(target, ignore_errors=True)
        # conf/local/ holds one machine's settings (a developer's paths, keys): never shipped
        shutil.copytree(CONF, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "local"))


setup(cmdclass={"build_py": BuildWithConf})
