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


@pytest.mark.parametrize("call", ["evaluate", "load", "sample", "draw_maps"])
def test_the_library_names_an_empty_or_folder_checkpoint_as_given(call, tmp_path, monkeypatch):
    """The same from a notebook: api.evaluate(""), api.load("") ... said "ckpt='.'" (the empty string had
    become Path('') before checkpoints.load saw it), and a folder was "no such checkpoint file"."""
    from attnexp import api
    from attnexp.config import ConfigError

    monkeypatch.chdir(tmp_path)
    calls = {"evaluate": lambda c: api.evaluate(c), "load": lambda c: api.load(c),
             "sample": lambda c: api.sample(c, "the"), "draw_maps": lambda c: api.draw_maps(ckpt=c, texts=["the"])}
    with pytest.raises(ConfigError, match=r"^ckpt= is empty "):
        calls[call]("")
    with pytest.raises(ConfigError, match=r"^ckpt='\.' is a folder "):
        calls[call](".")
    assert not any(tmp_path.iterdir())  # nothing written on the way
