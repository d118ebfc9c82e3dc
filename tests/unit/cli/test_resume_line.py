"""The "Resume with:" line a stopped run prints is pasted into a shell as it is: the shell and then
Hydra's override grammar must both read the folder back. Before, `run (copy)` was shell-quoted only,
and Hydra refused the pasted line."""

from __future__ import annotations

import shlex

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from attnexp.cli.train import hydra_quote, say_stopped


@pytest.mark.parametrize("name", ["run", "run (copy)", "it's a run", 'say "hi"', "a,b=c", "back\\slash", "end\\"])
def test_the_resume_line_reads_back_through_the_shell_and_hydra(name, tmp_path, capsys):
    out = tmp_path / name
    say_stopped({"error": "stopped by SIGTERM", "resume_checkpoint": str(out / "interrupted.ckpt")},
                ["trainer.max_epochs=3", "data.corpus=my file.txt"], False, out)
    line = capsys.readouterr().err.strip().split("Resume with: ", 1)[1]
    words = shlex.split(line)
    assert words[:4] == ["python", "-m", "attnexp", "train"] and words[-1] == "resume=auto"
    parsed = {o.key_or_group: o.value() for o in OverridesParser.create().parse_overrides(words[4:])}
    assert parsed["hydra.run.dir"] == str(out)
    assert parsed["trainer.max_epochs"] == 3


def test_plain_paths_stay_bare():
    assert hydra_quote("/home/you/outputs/2026-11-26/09-00-00_toy-lm_causal") == \
        "/home/you/outputs/2026-11-26/09-00-00_toy-lm_causal"
