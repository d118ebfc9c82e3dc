"""The front door and the manual stay true: the README is a front door (at most 300 lines, with a
table of contents), every picture the README or the docs show exists and is listed in
docs/pictures.md with the command that draws it, and every docs page is in the site's nav."""

from __future__ import annotations

import os
import re

import pytest

from helpers.runs import REPO

PICTURE = re.compile(r"!\[[^\]]*\]\(([^)]+)\)")


def pages():
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def test_the_readme_is_a_front_door():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 300
    assert "**Contents:**" in text and "python -m attnexp train" in text and "python -m pytest" in text


def test_every_picture_exists_and_is_made_by_a_listed_command():
    listed = (REPO / "docs" / "pictures.md").read_text()
    missing, unlisted = [], []
    for page in pages():
        for target in PICTURE.findall(page.read_text()):
            path = (page.parent / target).resolve()
            if not path.is_file():
                missing.append(f"{page.name}: {target}")
            row = next((line for line in listed.splitlines() if f"`{path.name}`" in line), "")
            if "python scripts/" not in row:
                unlisted.append(f"{page.name}: {path.name}")
    assert not missing, missing
    assert not unlisted, f"pictures without the command that draws them in docs/pictures.md: {unlisted}"


def test_every_docs_page_is_in_the_nav():
    nav = (REPO / "mkdocs.yml").read_text()
    assert [p.name for p in sorted((REPO / "docs").glob("*.md")) if p.name not in nav] == []


def config_page():
    import importlib.util

    spec = importlib.util.spec_from_file_location("config_page", REPO / "scripts" / "docs" / "config_page.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_config_group_reference_is_what_the_script_generates_from_conf():
    """docs/config_groups.md is generated from conf/ (python scripts/docs/config_page.py), never kept by
    hand: an option added to conf/ without regenerating it fails here."""
    mod = config_page()
    assert (REPO / "docs" / "config_groups.md").read_text() == mod.page(), \
        "docs/config_groups.md is stale: run python scripts/docs/config_page.py"


def test_the_groups_table_of_the_readme_and_the_docs_is_one_generated_from_conf():
    """README.md and docs/configuration.md kept the groups table by hand and had drifted apart (the
    logger row); both now hold the generator's table, whose options are conf/'s and whose defaults are
    conf/config.yaml's: an option added to conf/ or a default changed without regenerating fails here."""
    import yaml

    mod = config_page()
    table = mod.groups_table()
    for page in mod.TABLE_PAGES:
        text = page.read_text()
        assert f"{mod.GROUPS_START}\n{table}\n{mod.GROUPS_END}" in text, \
            f"{page.name}'s groups table is stale: run python scripts/docs/config_page.py"
    listed = {row.split(" | ")[0].strip("| `"): row for row in table.splitlines()[2:]}
    for group in ("attention", "model", "data", "task", "trainer", "logger", "experiment", "debug"):
        for option in (REPO / "conf" / group).glob("*.yaml"):
            assert f"`{option.stem}`" in listed[group], (group, option.stem)
    default = yaml.safe_load((REPO / "conf" / "config.yaml").read_text())["defaults"]
    assert "`tensorboard` (default)" in listed["logger"] and {"logger": "tensorboard"} in default


def test_the_generator_writes_one_safe_row_or_refuses():
    """A description with `<placeholders>` and `&` lands escaped (the page ate `outputs/<date>/...`
    as HTML); one that spans lines (the help group's header pasted whole broke the row, and mkdocs
    --strict then failed on `[key=value ...]` read as a reference link) is refused, naming the yaml."""
    import pytest

    mod = config_page()
    assert mod.cell("runs in outputs/<date>/ & `sqlite:///<x>.db`", REPO / "a.yaml") == \
        "runs in outputs/&lt;date&gt;/ &amp; `sqlite:///<x>.db`"
    assert mod.cell("a|b", REPO / "a.yaml") == "a\\|b"
    with pytest.raises(ValueError, match="a.yaml: its description spans lines"):
        mod.cell("Usage: [group=option ...]\n[key=value ...]", REPO / "a.yaml")
    with pytest.raises(ValueError, match=r"a '\|' inside `x=a\|b`"):
        mod.cell("`x=a|b`", REPO / "a.yaml")


def test_no_escaped_bar_inside_a_code_span():
    """Python-Markdown shows `a\\|b` inside a code span literally (GitHub hides the backslash): the
    configuration page read `causal\\|bidirectional`. Choices go in separate code spans."""
    bad = [f"{page.name}: {span}" for page in pages() for span in re.findall(r"`[^`\n]*\\\|[^`\n]*`", page.read_text())]
    assert not bad, bad


@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path):
    """`mkdocs build --strict`, no --quiet: a broken page (a dead link, an anchor, a reference
    autorefs cannot find) fails a test, not only CI. Skipped where the docs extra is not installed."""
    import shutil
    import subprocess

    if shutil.which("mkdocs") is None:
        pytest.skip("mkdocs is not installed (pip install -e '.[docs]')")
    done = subprocess.run(["mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=REPO,
                          capture_output=True, text=True, timeout=600, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    warnings = [line for line in done.stderr.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert done.returncode == 0 and not warnings, "\n".join(warnings or done.stderr.splitlines()[-10:])


def test_every_table_row_has_its_headers_cells():
    """README's softpick row had a duplicated clause and a stray backtick after an unescaped '|' inside
    a code span (GitHub splits a row at every unescaped '|', code span or not): each row of every
    table has as many cells as its header."""
    bad = []
    for page in pages():
        table: list[str] = []
        for line in [*page.read_text().splitlines(), ""]:
            if line.startswith("|"):
                table.append(line)
                continue
            if table:
                cells = [len(re.split(r"(?<!\\)\|", row.strip().strip("|"))) for row in table]
                bad += [f"{page.name}: {row[:60]}" for row, n in zip(table, cells) if n != cells[0]]
            table = []
    assert not bad, bad


def test_ci_runs_the_readmes_test_command():
    """.ci/run installs and tests with the README's second command (pip's -q and pytest's --durations
    aside): a change to one that the other misses fails here."""
    readme = (REPO / "README.md").read_text()
    line = next(x for x in readme.splitlines() if x.startswith("python3 -m venv") and "python -m pytest" in x)
    command = line.split(" && . .venv/bin/activate && ", 1)[1]
    ci = (REPO / ".ci" / "run").read_text().replace(" -q", "").replace(" --durations=15", "")
    assert command in ci, command


def test_the_readmes_docs_line_installs_from_the_lock_as_ci_does():
    """Issue 50. Before: README's docs line installed without the lock, and `mkdocs serve` printed
    Material's notice about MkDocs 2 (which .ci/run silences)."""
    line = next(x for x in (REPO / "README.md").read_text().splitlines() if "mkdocs serve" in x)
    assert "pip install -c requirements/lock.txt -e '.[docs]'" in line and "NO_MKDOCS_2_WARNING=1 mkdocs serve" in line
    ci = (REPO / ".ci" / "run").read_text()
    assert "pip install -q -c requirements/lock.txt -e '.[docs]'" in ci and "NO_MKDOCS_2_WARNING=1 mkdocs build" in ci
