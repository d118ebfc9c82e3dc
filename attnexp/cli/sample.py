"""`python -m attnexp sample ckpt=PATH prompt="the dog" [max_new_tokens=50] [temperature=1.0] [top_k=N]
[num_samples=1] [seed=0]`: text from a causal language model's checkpoint (nanoGPT's sample.py)."""

from __future__ import annotations

import sys

from attnexp.config import ConfigError

USAGE = ('usage: python -m attnexp sample ckpt=PATH prompt="the dog" [max_new_tokens=50] [temperature=1.0] '
         '[top_k=N] [num_samples=1] [seed=0]')
NUMBERS = {"max_new_tokens": int, "temperature": float, "top_k": int, "num_samples": int, "seed": int}


def sample_cli(argv: list[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        print(USAGE)
        return 0
    args: dict = {}
    try:
        for a in argv:
            key, sep, value = a.partition("=")
            if not sep or key not in ("ckpt", "prompt", *NUMBERS):
                raise ConfigError(f"cannot read {a!r}; {USAGE}")
            if not value and key != "prompt":  # prompt= is an empty prompt; ckpt= was reported as ckpt='.'
                raise ConfigError(f"{key}= is empty; {USAGE}")
            try:
                args[key] = NUMBERS[key](value) if key in NUMBERS else value
            except ValueError:
                raise ConfigError(f"{key}={value!r} is not a number; {USAGE}") from None
        if "ckpt" not in args:
            raise ConfigError(f"give ckpt=PATH; {USAGE}")
        from attnexp import api

        texts = api.sample(args.pop("ckpt"), args.pop("prompt", ""), **args)
    except ConfigError as e:
        print(f"attnexp sample: {e}", file=sys.stderr)
        return 2
    print("\n---\n".join(texts))
    return 0
