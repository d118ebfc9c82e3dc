#!/usr/bin/env python
"""The package's size, as issue 51 item 6 counts it ("lines of attnexp/ + hydra_plugins/ after <=
before"): every line of their .py files, split into code, docstrings, comments and blank lines.

    python scripts/package_lines.py                      # the working tree
    python scripts/package_lines.py --against 57811a9    # beside a commit, with the difference
    python scripts/package_lines.py --against 57811a9 --commits   # and each commit's net change since

A revision is read from git (git show), so the working tree is left as it is. Prints only: a line
count is not a measurement of this machine, and git can recompute it for any commit.
"""

from __future__ import annotations

import argparse
import ast
import io
import subprocess
import tokenize
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = ("attnexp", "hydra_plugins")
KINDS = ("code", "docstrings", "comments", "blank")


def kinds(source: str) -> Counter:
    """How many of `source`'s lines are code, docstring, comment or blank. A line holding code and a
    comment is code; a docstring is the string a module, class or function starts with, blank lines
    and all."""
    lines = source.splitlines()
    doc, comment = set(), set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body \
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            doc.update(range(body[0].lineno, body[0].end_lineno + 1))
    code = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comment.add(tok.start[0])
        elif tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
            code.update(range(tok.start[0], tok.end[0] + 1))
    counts = Counter()
    for i, line in enumerate(lines, 1):
        if i in doc:  # its blank lines too
            counts["docstrings"] += 1
        elif not line.strip():
            counts["blank"] += 1
        else:
            counts["code" if i in code or i not in comment else "comments"] += 1
    return counts


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout


def files_at(rev: str | None) -> dict[str, str]:
    """The package's .py files at `rev` (None: the working tree, tracked or not), path -> text."""
    if rev is None:
        return {str(p.relative_to(REPO)): p.read_text() for d in PACKAGE for p in sorted((REPO / d).rglob("*.py"))}
    names = git("ls-tree", "-r", "--name-only", rev, "--", *PACKAGE).split()
    return {n: git("show", f"{rev}:{n}") for n in names if n.endswith(".py")}


def size(rev: str | None) -> Counter:
    total = Counter({k: 0 for k in KINDS})
    for text in files_at(rev).values():
        total.update(kinds(text))
    return total


def row(name: str, c: Counter) -> str:
    return f"{name:<24} {sum(c[k] for k in KINDS):>7,}  " + "  ".join(f"{c[k]:>6,} {k}" for k in KINDS)


def commits_since(rev: str) -> list[str]:
    """Each commit since `rev` that changed the package's line count: its net change and subject."""
    out = []
    for line in git("log", "--reverse", "--format=%h %s", f"{rev}..HEAD").splitlines():
        sha, subject = line.split(" ", 1)
        stat = git("diff", "--numstat", f"{sha}^", sha, "--", *PACKAGE)
        net = sum(int(a) - int(d) for a, d, name in (s.split("\t") for s in stat.splitlines())
                  if name.endswith(".py") and a != "-")
        if net:
            out.append(f"{net:+6d}  {sha}  {subject[:100]}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--against", metavar="REV", help="count that commit's package too, and the difference")
    ap.add_argument("--commits", action="store_true", help="with --against: each commit's net change since REV")
    args = ap.parse_args()
    now = size(None)
    print(row("working tree", now))
    if args.against:
        before = size(args.against)
        print(row(args.against, before))
        diff = Counter({k: now[k] - before[k] for k in KINDS})
        print(f"{'difference':<24} {sum(diff.values()):>+7,}  " + "  ".join(f"{diff[k]:>+6,} {k}" for k in KINDS))
        if args.commits:
            print("\n".join(commits_since(args.against)))


if __name__ == "__main__":
    main()
