"""What attnexp patches in submitit: the SLURM watcher's sacct command (SlurmInfoWatcher._make_command),
wrapped so sacct's "accounting storage is disabled" goes to /dev/null after its first call.
tests/unit/test_private_apis.py holds it to the installed submitit."""

from __future__ import annotations


def quiet_sacct(watcher) -> None:
    """Wrap `watcher._make_command` once: every sacct call after the first with its stderr dropped."""
    if getattr(watcher, "_attnexp_quiet", False):
        return
    make = watcher._make_command

    def command():
        cmd = make()
        if cmd is None or not watcher.num_calls:
            return cmd
        return ["sh", "-c", '"$@" 2>/dev/null', "sh", *cmd]  # the same sacct call, its stderr dropped

    watcher._make_command = command
    watcher._attnexp_quiet = True
