"""scripts/package_lines.py: the package's size as issue 51 item 6 counts it, split by kind."""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers.runs import REPO

sys.path.insert(0, str(REPO / "scripts"))

from package_lines import PACKAGE, kinds, size  # noqa: E402

SOURCE = '''"""A module docstring

with a blank line inside."""

import os  # a comment beside code is code

# a comment alone


def f():
    """One line."""
    text = """a string that is
not a docstring"""
    return os.sep + text
'''


def test_each_line_is_counted_once_by_what_it_holds():
    c = kinds(SOURCE)
    assert c == {"docstrings": 4, "code": 5, "comments": 1, "blank": 4}
    assert sum(c.values()) == len(SOURCE.splitlines())


def test_the_working_tree_count_is_every_line_of_the_package_files():
    lines = sum(len(p.read_text().splitlines()) for d in PACKAGE for p in (REPO / d).rglob("*.py"))
    assert sum(size(None).values()) == lines


def test_the_count_at_the_issue_s_filing_is_the_one_it_states():
    # issue 51 was filed at 57811a9 and measured 12,521 lines (wc -l of the same files)
    try:
        before = size("57811a9")
    except subprocess.CalledProcessError:
        pytest.skip("57811a9 is not in this clone's history (a shallow clone)")
    assert sum(before.values()) == 12521
    assert before["code"] == 8427
