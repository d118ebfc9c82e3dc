"""An empty value on the command line of eval, sample and maps is refused in one line naming the key.
Before, `eval ckpt=` said "ckpt='.': no such checkpoint file" (the empty string had become Path('')),
and `maps ... out=` drew into the working folder."""

from __future__ import annotations

import pytest

from attnexp.cli import main


@pytest.mark.parametrize("argv", [["eval", "ckpt="], ["eval", "ckpt=x.ckpt", "out="], ["sample", "ckpt="],
                                  ["sample", "ckpt=x.ckpt", "top_k="], ["maps", "ckpt=", "text=a"],
                                  ["maps", "hf=x", "text=a", "out="]], ids=lambda a: " ".join(a))
def test_an_empty_value_is_named_in_one_line(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    key = next(a for a in argv[1:] if a.endswith("="))
    assert len(err.splitlines()) == 1 and f"{key} is empty" in err and "'.'" not in err, err


def test_an_empty_prompt_is_still_a_prompt(capsys):
    """sample's prompt= is an empty prompt (a sample from the start), not a missing value."""
    assert main(["sample", "prompt=", "ckpt="]) == 2
    err = capsys.readouterr().err
    assert "ckpt= is empty" in err and "prompt" not in err.split(";")[0]  # refused for its ckpt, not its prompt
