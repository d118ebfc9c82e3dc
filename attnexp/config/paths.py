"""Where attnexp's own configs are, and the `paths` defaults as conf/paths/default.yaml writes them:
the one owner of `outputs`, `multirun` and the cache folder for code that composes no run (the
notebook's pretrained tokenizer, `compare` with no folder, a data config built outside Hydra)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from attnexp.config.checks import ConfigError
from attnexp.config.files import FileRefused, check_replaceable


def conf_dir() -> Path:
    """attnexp's own configs: the copy a wheel ships (attnexp/conf/, copied from the checkout's conf/
    by setup.py), else conf/ beside the package in a source checkout (an editable install)."""
    package = Path(__file__).resolve().parents[1]
    for cand in (package / "conf", package.parent / "conf"):
        if (cand / "config.yaml").is_file():
            return cand
    raise FileNotFoundError(f"attnexp's configs are missing from {package} (no conf/config.yaml inside it or beside it); "
                            f"reinstall attnexp (pip install --force-reinstall attnexp, or pip install -e . in a checkout)")


def default_paths() -> dict:
    """conf/paths/default.yaml as written (interpolations unresolved): where a command that composes
    nothing (compare with no folder) or whose composition failed looks for runs and sweeps. The one
    place the defaults `outputs` and `multirun` are spelled is that yaml."""
    import yaml

    return yaml.safe_load((conf_dir() / "paths" / "default.yaml").read_text())


def default_cache_dir() -> str:
    """paths.cache_dir as conf/paths/default.yaml resolves it here (its ${oc.env:...} read now)."""
    from omegaconf import OmegaConf

    return str(OmegaConf.create({"cache_dir": default_paths()["cache_dir"]}).cache_dir)


@contextmanager
def whole(path: Path | str) -> Iterator[Path]:
    """Write a file whole or not at all: yields a temporary path beside `path` (`.<name>.<pid>.tmp`,
    the name training.checkpointing.remove_orphans clears after a kill) that replaces `path` once the block
    completes and is removed if anything in it fails (a full disk once left 0-byte pictures, GIFs
    and records behind). Every file attnexp writes in place goes through it. FileRefused (config.files)
    where `path` is a link, a folder or anything but a regular file: the writing rule."""
    path = Path(path)
    check_replaceable(path)  # the writing rule (config.files): a link, folder or pipe there is left as it is
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.unlink(missing_ok=True)  # a link or file planted at the temporary name is not written through
    except IsADirectoryError:
        raise FileRefused(f"{tmp.name}: a folder where attnexp writes a temporary file") from None
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_whole(path: Path | str, content: str | bytes | Callable[[Path], None]) -> None:
    """`path` written whole (`whole`) by the writing rule: its text or bytes, or what `content(tmp)`
    writes (a library's save). A link, folder or pipe at `path` is left as it is, and the run stops with
    one line naming it (ConfigError)."""
    try:
        with whole(path) as tmp:
            if isinstance(content, str):
                tmp.write_text(content, encoding="utf-8")
            elif isinstance(content, bytes):
                tmp.write_bytes(content)
            else:
                content(tmp)
    except FileRefused as e:
        raise ConfigError(f"{path} is {e}; attnexp writes only regular files there: move it away, or use another "
                          f"folder") from None
