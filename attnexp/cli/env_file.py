"""The `.env` file: variables for `${oc.env:X}` and the loggers (WANDB_API_KEY, MLFLOW_TRACKING_URI),
as lightning-hydra-template reads one, but only the user's own. Who can write it decides what runs,
so it is read from the folder the command runs from (never a parent folder, which someone else may
own), or from the file ATTNEXP_ENV_FILE names (empty: none); only a regular UTF-8 file of at most
64 KiB, with no `${...}` expansion; variables that steer processes rather than attnexp are left out;
the environment wins over the file. A file that breaks a rule is one line on stderr and the command
goes on without it: every variable in it is optional (a missing key makes a logger say so itself),
and a stranger's file must not be able to stop `compare` or `train` either."""

from __future__ import annotations

import io
import os
import re
import sys

NAMED = "ATTNEXP_ENV_FILE"
MAX_BYTES = 64 * 1024
# Variables that make a process load code, pretend to be another rank of a distributed job, or pick
# the programs it starts: the Python and dynamic loader's search paths and start-up hooks, the shell's
# start-up file (SLURM's batch script is a bash script), git's helpers (wandb calls git), compiled-kernel
# caches, and torch.distributed's / SLURM's / Lightning's process variables.
STEERING = re.compile(r"(PYTHON\w*|LD_\w*|DYLD_\w*|PATH|BASH_ENV|ENV|SHELLOPTS|BASHOPTS|PS4|IFS|PROMPT_COMMAND"
                      r"|GIT_\w*|TORCHINDUCTOR_\w*|TRITON_\w*|TORCH_EXTENSIONS_DIR|TORCHELASTIC_\w*|SLURM_\w*|PL_\w*"
                      r"|RANK|LOCAL_RANK|GROUP_RANK|NODE_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|MASTER_ADDR|MASTER_PORT"
                      r"|ATTNEXP_SUBCOMMAND|ATTNEXP_ENV_FILE)")


def say(line: str) -> None:
    """Said once a command: a DDP or sweep child process, which reads the file again, keeps quiet."""
    if not os.environ.get("ATTNEXP_SUBCOMMAND"):
        print(f"attnexp: {line}", file=sys.stderr)


def where() -> str | None:
    """The file to read: ATTNEXP_ENV_FILE's, else ./.env; None when there is none to read."""
    named = os.environ.get(NAMED)
    if named is not None:
        return named or None
    try:
        here = os.getcwd()
    except OSError:  # the folder the command runs from was deleted: it holds no .env
        return None
    path = os.path.join(here, ".env")
    return path if os.path.lexists(path) else None


def load_env() -> dict[str, str]:
    """Read the user's .env into os.environ (a variable already set wins); returns what it set."""
    path = where()
    if path is None:
        return {}
    from attnexp.config.files import FileRefused, read_text

    try:
        text = read_text(path, MAX_BYTES)  # the one reading rule: a regular file, its size checked first, no pipe waited on
    except FileRefused as e:
        say(f"{path}: {e}; not read (fix or remove it, or set {NAMED}= to read none): going on without it")
        return {}
    from dotenv import dotenv_values

    values = {k: v for k, v in dotenv_values(stream=io.StringIO(text), interpolate=False).items() if v is not None}
    left = sorted(k for k in values if STEERING.fullmatch(k))
    if left:
        say(f"{path}: left out {', '.join(left)}: they steer processes, not attnexp, and a .env never sets them "
            f"(export them in your shell if you mean them)")
    taken = {k: v for k, v in values.items() if k not in left and k not in os.environ}
    os.environ.update(taken)
    return taken
