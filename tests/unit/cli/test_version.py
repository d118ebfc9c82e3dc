"""`python -m attnexp --version`, as every tool a researcher pins answers it. Before: "unknown command
'--version'" and the whole usage, exit 2."""

from __future__ import annotations

from importlib.metadata import version

import pytest

import attnexp
from attnexp.cli import main


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_the_version_is_the_installed_packages(flag, capsys):
    assert main([flag]) == 0
    assert capsys.readouterr().out == f"attnexp {version('attnexp')}\n"
    assert attnexp.__version__ == version("attnexp")  # the two places it is written agree
