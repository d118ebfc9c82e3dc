"""The README's front door works as written: its "From Python" snippet runs unchanged."""

from __future__ import annotations

import re

from helpers.runs import REPO


def readme_block(after: str) -> str:
    text = (REPO / "README.md").read_text()
    start = text.index(after)
    return re.search(r"```python\n(.*?)```", text[start:], re.S).group(1)


def test_the_from_python_snippet_runs_as_written(tmp_path, monkeypatch):
    code = readme_block("From Python (a notebook, a script)")
    assert "from attnexp.api import" in code
    monkeypatch.chdir(tmp_path)  # it writes outputs/notebook/ where it runs
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    assert scope["summary"]["status"] == "completed" and scope["summary"]["epochs"] == 2
    assert (tmp_path / "outputs" / "notebook" / "summary.json").is_file()
