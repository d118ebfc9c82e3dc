"""The front door and the manual stay true: the README is a front door (at most 300 lines, with a
table of contents), every picture the README or the docs show exists and is listed in
docs/pictures.md with the command that draws it, and every docs page is in the site's nav."""

from __future__ import annotations

import re

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


def test_the_config_group_reference_is_what_the_script_generates_from_conf():
    """docs/config_groups.md is generated from conf/ (python scripts/docs/config_page.py), never kept by
    hand: an option added to conf/ without regenerating it fails here."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("config_page", REPO / "scripts" / "docs" / "config_page.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert (REPO / "docs" / "config_groups.md").read_text() == mod.page(), \
        "docs/config_groups.md is stale: run python scripts/docs/config_page.py"
