"""The `.env` is the user's own (cli/env_file.py), each case planted as issue 49 found it. Before:
python-dotenv's upward search read a parent folder's .env, whose PYTHONPATH reached every DDP child
and sweep job (a planted sitecustomize.py ran); `${MY_SECRET}` was expanded into another variable;
LOCAL_RANK=1 made the run believe it was rank 1; a 3 GB file cost 6 GB and minutes, a named pipe hung
every command, a latin-1 file and a deleted working folder were tracebacks."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from attnexp.cli.env_file import MAX_BYTES, load_env
from helpers.runs import REPO

PLANTED = "import pathlib; pathlib.Path({marker!r}).write_text('ran')\n"


@pytest.fixture
def clean_env(monkeypatch):
    """os.environ as it was after the test, whatever load_env set."""
    for key in ("ATTNEXP_ENV_FILE", "ATTNEXP_SUBCOMMAND", "MY_SECRET_TOKEN", "WANDB_NOTES", "LOCAL_RANK", "PYTHONPATH",
                "ATTNEXP_T_KEY"):
        monkeypatch.delenv(key, raising=False)
    before = dict(os.environ)
    yield monkeypatch
    os.environ.clear()
    os.environ.update(before)


def planted_sitecustomize(tmp_path):
    site, marker = tmp_path / "planted", tmp_path / "marker"
    site.mkdir()
    (site / "sitecustomize.py").write_text(PLANTED.format(marker=str(marker)))
    return site, marker


def child_ran_planted_code(marker) -> bool:
    """A child process as Lightning's DDP or a sweep's launcher starts one: the parent's environment."""
    subprocess.run([sys.executable, "-c", "pass"], env=dict(os.environ), check=True)
    return marker.exists()


def test_a_parent_folders_dotenv_is_never_read(tmp_path, clean_env, capsys):
    site, marker = planted_sitecustomize(tmp_path)
    (tmp_path / ".env").write_text(f"PYTHONPATH={site}\nATTNEXP_T_KEY=from-the-parent\n")
    (tmp_path / "a" / "b").mkdir(parents=True)
    clean_env.chdir(tmp_path / "a" / "b")
    assert load_env() == {}
    assert "PYTHONPATH" not in os.environ and "ATTNEXP_T_KEY" not in os.environ
    assert not child_ran_planted_code(marker)
    assert capsys.readouterr().err == ""


def test_process_variables_are_left_out_in_one_line_and_the_rest_is_read(tmp_path, clean_env, capsys):
    site, marker = planted_sitecustomize(tmp_path)
    (tmp_path / ".env").write_text(f"PYTHONPATH={site}\nLOCAL_RANK=1\nLD_PRELOAD=/tmp/x.so\nATTNEXP_T_KEY=mine\n")
    clean_env.chdir(tmp_path)
    assert load_env() == {"ATTNEXP_T_KEY": "mine"}
    assert os.environ["ATTNEXP_T_KEY"] == "mine" and "LOCAL_RANK" not in os.environ and "LD_PRELOAD" not in os.environ
    assert not child_ran_planted_code(marker)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "left out LD_PRELOAD, LOCAL_RANK, PYTHONPATH" in err, err


def test_no_variable_is_expanded_from_the_environment(tmp_path, clean_env):
    clean_env.setenv("MY_SECRET_TOKEN", "s3cret-value")
    (tmp_path / ".env").write_text("WANDB_NOTES=${MY_SECRET_TOKEN}\n")
    clean_env.chdir(tmp_path)
    load_env()
    assert os.environ["WANDB_NOTES"] == "${MY_SECRET_TOKEN}"


def test_the_environment_wins_and_a_named_file_replaces_the_folders(tmp_path, clean_env):
    (tmp_path / ".env").write_text("ATTNEXP_T_KEY=folder\n")
    (tmp_path / "elsewhere.env").write_text("ATTNEXP_T_KEY=named\n")
    clean_env.chdir(tmp_path)
    clean_env.setenv("ATTNEXP_ENV_FILE", str(tmp_path / "elsewhere.env"))
    assert load_env() == {"ATTNEXP_T_KEY": "named"}
    del os.environ["ATTNEXP_T_KEY"]
    clean_env.setenv("ATTNEXP_ENV_FILE", "")  # none read
    assert load_env() == {}
    clean_env.delenv("ATTNEXP_ENV_FILE")
    clean_env.setenv("ATTNEXP_T_KEY", "environment")
    assert load_env() == {} and os.environ["ATTNEXP_T_KEY"] == "environment"


@pytest.mark.parametrize("kind", ["huge", "latin1", "folder"])
def test_a_bad_file_is_one_line_and_the_command_goes_on(tmp_path, clean_env, capsys, kind):
    env = tmp_path / ".env"
    if kind == "huge":  # a sparse 3 GB file: refused by its size, never read
        with open(env, "wb") as f:
            f.truncate(3 * 1024**3)
    elif kind == "latin1":
        env.write_bytes("ATTNEXP_T_KEY=caf\u00e9\n".encode("latin-1"))
    else:
        env.mkdir()
    clean_env.chdir(tmp_path)
    t0 = time.perf_counter()
    assert load_env() == {}
    assert time.perf_counter() - t0 < 1.0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(env) in err and "going on without it" in err, err
    assert {"huge": f"over the {MAX_BYTES:,} such a file may hold", "latin1": "not UTF-8",
            "folder": "a folder, not a file"}[kind] in err


def run(code: str, cwd, **env) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(REPO), **env}
    for key in ("ATTNEXP_ENV_FILE", "ATTNEXP_SUBCOMMAND"):  # an in-process train of this worker may have set it
        full.pop(key, None)
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=full, capture_output=True, text=True, timeout=120)


def test_a_named_pipe_called_dotenv_hangs_no_command(tmp_path):
    os.mkfifo(tmp_path / ".env")
    r = run("from attnexp.cli import main; raise SystemExit(main(['compare', 'nowhere']))", tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"{tmp_path / '.env'}: not a regular file" in r.stderr and "nowhere" in r.stderr, r.stderr


def test_a_deleted_working_folder_is_no_traceback(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    code = (f"import os; os.chdir({str(gone)!r}); os.rmdir({str(gone)!r})\n"
            f"from attnexp.cli import main; raise SystemExit(main(['compare', {str(tmp_path)!r}]))")
    r = run(code, tmp_path)
    assert "Traceback" not in r.stderr and r.returncode == 2, r.stderr
