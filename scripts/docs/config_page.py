#!/usr/bin/env python
"""docs/config_groups.md from conf/: every option of every config group, with the first comment of
its yaml (what it is) or else the settings it makes. Generated, never edited by hand;
tests/unit/test_docs.py checks that the committed page is what this writes.

    python scripts/docs/config_page.py            # rewrite docs/config_groups.md
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONF = REPO / "conf"
OUT = REPO / "docs" / "config_groups.md"


def about(path: Path) -> str:
    """The yaml's first comment sentence (not a @package line, not an indented example command),
    else what it sets."""
    import yaml

    comments = []
    for line in path.read_text().splitlines():  # the comment the file opens with
        if not line.startswith("#"):
            break
        if "@package" not in line and not line.startswith("#  "):
            comments.append(line.lstrip("# ").strip())
            if comments[-1].endswith((".", ":")):  # a sentence that ends with its line
                break
    if comments:
        text = " ".join(comments)
        return text.split(". ")[0].rstrip(".:") + "."
    node = yaml.safe_load(path.read_text()) or {}
    flat = []

    def walk(d, prefix=""):
        for k, v in d.items():
            if k in ("defaults", "_target_"):
                continue
            if isinstance(v, dict):
                walk(v, f"{prefix}{k}.")
            else:
                flat.append(f"`{prefix}{k}={v}`")

    walk(node if isinstance(node, dict) else {})
    return ", ".join(flat[:6]) + (" ..." if len(flat) > 6 else "") if flat else "its group's defaults"


def cell(text: str, where: Path) -> str:
    """`text` as one Markdown table cell: `<`, `>` and `&` escaped outside code spans (else the page
    eats `<date>` as HTML), `|` escaped outside them; a cell that cannot be one row (a line break,
    a `|` inside a code span, which Python-Markdown shows as a literal `\\|`) is refused, naming
    the yaml to fix."""
    import html

    if "\n" in text:
        raise ValueError(f"{where}: its description spans lines; give the yaml an opening comment of one sentence")
    parts = text.split("`")
    if len(parts) % 2 == 0:
        raise ValueError(f"{where}: an unclosed ` in its description")
    for i, part in enumerate(parts):
        if i % 2 and "|" in part:
            raise ValueError(f"{where}: a '|' inside `{part}` breaks the table row; write the choices as separate "
                             f"code spans (`a` or `b`)")
        if not i % 2:
            parts[i] = html.escape(part, quote=False).replace("|", "\\|")
    return "`".join(parts)


def variant(path: Path) -> str:
    """An attention option: the variant it selects (the registry's own summary) and what it sets."""
    import yaml

    from attnexp import attention
    from attnexp.config import AttentionConfig

    node = yaml.safe_load(path.read_text()) or {}
    cls = attention.get(str(node.get("name")))
    if path.stem in ("causal", "bidirectional"):  # they read as masks, but each picks a variant and a mask
        mask = node.get("mask", AttentionConfig.mask)
        return f"`{cls.name}` with `mask={mask}`: a preset, not a mask for any variant (`attention={{name}}` " \
               f"`attention.mask={mask}` gives another variant that mask); {cls.summary}"
    sets = ", ".join(f"`{k}={v}`" for k, v in node.items() if k not in ("defaults", "name"))
    return f"`{cls.name}`: {cls.summary}" + (f" ({sets})" if sets else "")


def page() -> str:
    lines = ["# Every option of every config group", "",
             "Generated from `conf/` by `python scripts/docs/config_page.py` (do not edit by hand): each option with",
             "the first comment of its yaml, or the settings it makes. `python -m attnexp train --help` lists the",
             "same; `--cfg job` prints a composed config.", ""]
    for group in sorted(p for p in CONF.rglob("*") if p.is_dir() and any(p.glob("*.yaml"))):
        name = group.relative_to(CONF).as_posix()
        lines += [f"## `{name}`", "", "| option | what it is |", "| --- | --- |"]
        for option in sorted(group.glob("*.yaml")):
            text = variant(option) if name == "attention" else about(option)
            lines.append(f"| `{name}={option.stem}` | {cell(text, option.relative_to(REPO))} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    OUT.write_text(page())
    print(f"wrote {OUT}")
