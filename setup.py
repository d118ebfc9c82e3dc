"""The one thing pyproject.toml cannot say: conf/ (the top-level folder you edit, and the one the
docs name) ships inside the wheel as attnexp/conf/, so an installed attnexp composes its configs
from site-packages. setuptools' package-data only takes files under a package, and a package-dir
mapping would need every conf/ subfolder listed as a package; copying at build time keeps one
source of truth. conf_dir() (attnexp/launch/compose.py) reads the packaged copy, else the checkout's.

Only what the repository tracks ships: a checkout's conf/ may also hold a `.env`, `local/` (one
machine's settings) or a private experiment holding a key, and its package folders an untracked
module, a vendored file or a whole hydra_plugins/<pkg>/ (which Hydra imports at every start), none of
which may enter a wheel or an sdist; nor may a module deleted since an earlier build left it in
build/lib. In a git checkout the list is `git ls-files conf attnexp hydra_plugins`; an sdist is made
from that list too, so a wheel built from an sdist copies its whole conf/."""

import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

ROOT = Path(__file__).resolve().parent
CONF = ROOT / "conf"


SHIPPED = ("conf", "attnexp", "hydra_plugins")  # the folders whose files ship: each only as git tracks them


def tracked_conf(folders: tuple[str, ...] = ("conf",)) -> set[str] | None:
    """The files of `folders` as git tracks them (paths relative to the repository), or None outside a
    checkout."""
    if not (ROOT / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--", *folders], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit(f"attnexp's build: cannot list conf/'s tracked files with git ({e}); install git, or build "
                         f"from an sdist") from None
    return {f for f in out.decode().split("\0") if f and (ROOT / f).is_file()}


class BuildWithConf(build_py):
    def run(self):
        super().run()
        if self.editable_mode:  # an editable install reads the checkout's conf/ itself
            return
        drop_untracked(Path(self.build_lib))
        target = Path(self.build_lib) / "attnexp" / "conf"
        shutil.rmtree(target, ignore_errors=True)
        tracked = tracked_conf()
        if tracked is None:  # an sdist's conf/: what was tracked when it was made (never local/ or a .env)
            shutil.copytree(CONF, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "local", ".*"))
            return
        for name in sorted(tracked):
            dest = target / Path(name).relative_to("conf")
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest)


def drop_untracked(build_lib: Path) -> None:
    """Every file of the package folders in `build_lib` that git does not track goes: an untracked module
    setuptools found, or one an earlier build left there after it was deleted."""
    tracked = tracked_conf(SHIPPED[1:])
    if tracked is None:
        return
    for root in SHIPPED[1:]:
        for f in sorted((build_lib / root).rglob("*"), reverse=True):
            rel = f.relative_to(build_lib).as_posix()
            if f.is_file() and rel not in tracked and not rel.startswith("attnexp/conf/"):
                f.unlink()
            elif f.is_dir() and not any(f.iterdir()):
                f.rmdir()


class SdistOfTracked(sdist):
    def make_release_tree(self, base_dir, files):
        tracked = tracked_conf(SHIPPED)
        if tracked is not None:  # MANIFEST.in's `graft conf` and package discovery take every file there
            files = [f for f in files if Path(f).parts[:1] not in [(d,) for d in SHIPPED] or Path(f).as_posix() in tracked]
        super().make_release_tree(base_dir, files)


setup(cmdclass={"build_py": BuildWithConf, "sdist": SdistOfTracked})
