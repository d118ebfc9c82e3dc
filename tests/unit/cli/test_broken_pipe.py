"""`attnexp variants | head -1`: before, a BrokenPipeError traceback once head had its line."""

from __future__ import annotations

import os
import subprocess
import sys

from helpers.runs import REPO


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("ATTNEXP_SUBCOMMAND", None)
    p = subprocess.Popen([sys.executable, "-m", "attnexp", "variants"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    first = p.stdout.readline()
    p.stdout.close()  # the reader goes away, as head does after its line
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) in (0, 141) and first.startswith(b"attention=")
    assert "Traceback" not in err and "BrokenPipe" not in err, err
