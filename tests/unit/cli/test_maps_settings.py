"""`attnexp maps`' view settings are read before any model is loaded, each mistake one line naming the key."""

from __future__ import annotations

import pytest

from attnexp.cli import main


@pytest.mark.parametrize("value,said", [("abc", "max_tokens='abc' must be an integer"),
                                        ("2.5", "max_tokens='2.5' must be an integer"),
                                        ("1", "max_tokens=1 must be >= 2")])
def test_a_max_tokens_that_is_not_a_count_is_named(value, said, capsys):
    """Before: `max_tokens=abc` said "invalid literal for int() with base 10: 'abc'", naming no key."""
    assert main(["maps", "ckpt=no-such.ckpt", "text=the dog", f"max_tokens={value}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err, err
