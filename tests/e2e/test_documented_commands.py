"""Every `python -m attnexp ...` line of README.md and docs/*.md is run by a test, in a cheap mode
(issue 50): so a documented command cannot silently break. A `train` is composed and validated as
written (the precheck every run starts with: training them all would take an hour), a `-m` sweep has
each of its jobs composed; `--cfg`, `--help`, `variants` and the commands that read a run (`eval`,
`maps`, `sample`, `compare`) run for real on a run trained here; a documented error (`$ command`
followed by `attnexp: config error: ...`) must print exactly that line. The few that need the
network, a GPU cluster, a server or the user's own files are listed below with the reason."""

from __future__ import annotations

import re
import shlex

import pytest

from helpers.runs import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
NOT_RUN = {  # a fragment of the command -> why no test here runs it as written
    "hf=bert-base-uncased": "downloads bert-base-uncased from the Hugging Face hub (no network here)",
    "experiment=newsgroups_bert": "its model.init is the hub's bert-base-uncased (no network here)",
    "model.init=hf:/models/": "a folder on the reader's machine",
    "hydra/launcher=slurm": "a SLURM cluster's partition (tests/e2e/test_slurm.py runs the one-node cluster)",
    "storage=postgresql+psycopg://USER@HOST": "the reader's PostgreSQL server (tests/e2e/test_study_on_a_server.py)",
    "hydra.sweeper.storage=postgresql+psycopg://USER@HOST": "the reader's PostgreSQL server",
    "attention=halved data=counting": "a plugin package's variant and data set (tests/e2e/test_plugins.py installs one)",
    "attention=wide_window": "the reader's own conf/ from docs/extending.md (tests/unit/launch/test_user_config_dir.py)",
    "experiment=deep_rotary": "the reader's own conf/ from docs/extending.md (tests/unit/launch/test_user_config_dir.py)",
    "hydra.run.dir=/home/you/": "a run folder on the reader's machine (the resume tests run the same command)",
    "[DIR ...]": "a usage synopsis, not a command",
    "[scale=log]": "a usage synopsis, not a command",
}


def documented() -> list[tuple[str, str, str | None]]:
    """(page, command, the error line the page shows after it or None), continuation lines joined."""
    found = []
    for page in PAGES:
        lines = page.read_text().replace("\\\n", " ").splitlines()
        for i, line in enumerate(lines):
            for m in re.finditer(r"(?:^\$ |^|`)(python -m attnexp [^`#]*)", line.strip()):
                cmd = re.sub(r"\s+", " ", m.group(1)).strip()
                follows = lines[i + 1].strip() if i + 1 < len(lines) else ""
                error = follows if line.strip().startswith("$ ") and follows.startswith("attnexp: config error:") else None
                found.append((page.name, cmd, error))
    return sorted(set(found))


def test_the_pages_document_commands():
    cmds = documented()
    assert len(cmds) >= 35 and any(p == "README.md" for p, _, _ in cmds) and any(p == "sweeps.md" for p, _, _ in cmds)


@pytest.mark.slow
def test_every_documented_command_runs(tmp_path, capsys, monkeypatch):
    from attnexp.cli import main
    from attnexp.launch.command_line import precheck

    monkeypatch.chdir(tmp_path)
    run = tmp_path / "outputs" / "run"
    assert main(["train", "attention=causal", "trainer.max_epochs=1", "data.n_sentences=200", "logger=none",
                 f"hydra.run.dir={run}"]) == 0
    ckpt = str(run / "checkpoints" / "last.ckpt")
    capsys.readouterr()
    ran, skipped = [], []
    for page, cmd, error in documented():
        why = next((w for frag, w in NOT_RUN.items() if frag in cmd), None)
        if why:
            skipped.append(cmd)
            continue
        args = shlex.split(cmd.replace("outputs/<run>/checkpoints/last.ckpt", ckpt).replace("ckpt=PATH", f"ckpt={ckpt}"))[3:]
        where = f"{page}: {cmd}"
        if error:  # a documented error: exactly the line the page shows
            assert main(args) == 2, where
            assert capsys.readouterr().err.strip() == error, where
        elif args[0] == "train" and not any(a.startswith("--") for a in args):
            multirun = "-m" in args
            assert precheck([a for a in args[1:] if a != "-m"], multirun=multirun) is None, where
        elif args[0] == "compare" and not any(a.startswith(("study=", "storage=")) for a in args):
            assert main(["compare", str(run), *[a for a in args[1:] if "=" in a]]) == 0, where
        else:
            try:
                code = main(args)
            except SystemExit as e:  # Hydra's --help and --cfg end the process their own way
                code = e.code or 0
            assert code == 0, (where, capsys.readouterr().err[-500:])
        capsys.readouterr()
        ran.append(cmd)
    assert len(ran) >= 25 and len(skipped) <= 15, (len(ran), skipped)
