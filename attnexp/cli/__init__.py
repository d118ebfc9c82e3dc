"""`python -m attnexp <command>` and the `attnexp` console script: each command parses its
arguments, calls the library, and turns the outcome into an exit code (cli/exits.py)."""

from __future__ import annotations

import os
import sys
import time

from attnexp.cli.env_file import load_env

USAGE = """usage: python -m attnexp <command> [args]

commands:
  train [overrides]   train one run, or a sweep with -m (Hydra); `train --help` lists config groups
  variants            the attention variants: masks, backends, what their weights are
  eval ckpt=PATH [split=test|val|train]
                      a checkpoint's metrics on a split, with the split's maps
  sample ckpt=PATH prompt="..." [max_new_tokens=50 temperature=1.0 top_k=N num_samples=1]
                      text from a causal language model's checkpoint
  maps ckpt=PATH text="..." [out=DIR]
                      render the attention maps of a trained checkpoint for any text
  compare [DIR ...] [sort=KEY] [csv=PATH]
                      runs side by side from their summary.json (default: the newest sweep)

  --version           attnexp's version (`train --version`: Hydra's)

examples:
  python -m attnexp train attention=causal
  python -m attnexp train -m attention=causal,bidirectional model.n_layers=2,4
  python -m attnexp compare
"""
COMMANDS = ("train", "eval", "sample", "variants", "maps", "compare")


def main(argv: list[str] | None = None, started: float | None = None) -> int:
    """`started`: when the process started (`python -m attnexp` records it before any import), for
    the run's start-up time; now, for the console script. Output piped into a reader that stops
    early (`attnexp variants | head`) ends quietly, as the Python docs advise, not in a traceback."""
    try:
        return command(argv, started)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python flushes stdout again at exit
        return 141  # 128 + SIGPIPE, what a shell reports for a command whose reader went away


def command(argv: list[str] | None, started: float | None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    started = started or time.time()
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    if argv[0] in ("--version", "-V"):
        from importlib.metadata import version

        print(f"attnexp {version('attnexp')}")
        return 0
    load_env()
    cmd, rest = argv[0], argv[1:]
    if os.environ.get("ATTNEXP_SUBCOMMAND") == "train" and ("=" in cmd or cmd.startswith("-")):  # a DDP child Lightning started
        cmd, rest = "train", argv
    if cmd == "train":
        from attnexp.cli.train import train_cli

        return train_cli(rest, started)
    if cmd == "eval":
        from attnexp.cli.eval import eval_cli

        return eval_cli(rest)
    if cmd == "sample":
        from attnexp.cli.sample import sample_cli

        return sample_cli(rest)
    if cmd == "variants":
        from attnexp.cli.variants import variants_cli

        return variants_cli(rest)
    if cmd == "maps":
        from attnexp.cli.maps import maps_cli

        return maps_cli(rest)
    if cmd == "compare":
        from attnexp.cli.compare import compare_cli

        return compare_cli(rest)
    print(f"attnexp: unknown command {cmd!r}; choose one of: {', '.join(COMMANDS)}\n\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
