"""Where attnexp reaches into Lightning's private parts: each use is a function here, and
tests/unit/training/test_lightning_private.py fails loudly when the installed Lightning changes
what it relies on."""

from __future__ import annotations

import subprocess
import threading


def release_ddp_children(timeout: float = 60) -> None:
    """After one job of a sweep that trained with DDP: Lightning's launcher started the other ranks
    as child processes and a watcher thread that, when any child exits non-zero, SIGKILLs the children
    and the main process (`_ChildProcessObserver._terminate_all`). A failed job's children exit
    non-zero, so the watcher killed the whole sweep (no summary.json, no error line, the other jobs
    never ran). The watcher is given no children to watch, and the children are waited for (killed
    after `timeout` seconds), so the next job starts clean."""
    from lightning.fabric.strategies.launchers.subprocess_script import _ChildProcessObserver

    for t in threading.enumerate():
        if isinstance(t, _ChildProcessObserver):
            procs, t._child_processes = t._child_processes, []
            for p in procs:
                try:
                    p.wait(timeout)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
