"""A sweep's end, read from its folder because its jobs may have run in other processes (submitit):
the sweep's table, its failed and unfinished jobs with the command that continues them, and the jobs
refused their folder, which each job writes into the sweep's refused.txt (config/layout.REFUSED) and
this module alone reads."""

from __future__ import annotations

import logging
import shlex
import shutil
import sys
from pathlib import Path

from attnexp.cli.exits import SWEEP_FAILED
from attnexp.config import layout
from attnexp.config.files import FileRefused, append_text
from attnexp.results import summary
from attnexp.results.summary import FAILURES, Status

log = logging.getLogger("attnexp")


def say_refused(out: Path, root: Path, why: Exception) -> None:
    """A job of the sweep in `root` refused its folder `out` (another run's): said on the console and in
    the sweep's refused.txt; nothing of it goes into the log Hydra opened in that folder, which is that run's."""
    logger = logging.getLogger()
    for handler in [h for h in logger.handlers if isinstance(h, logging.FileHandler) and Path(h.baseFilename).parent == out]:
        logger.removeHandler(handler)
        handler.close()
    log.error("not run: %s", why)
    try:
        append_text(root / layout.REFUSED, f"not run: {' '.join(str(why).split())}\n")
    except (OSError, FileRefused) as e:
        log.error("not noted in %s: %s", root / layout.REFUSED, e)


def forget_refusals(root: Path) -> None:
    (root / layout.REFUSED).unlink(missing_ok=True)


def refusals(root: Path) -> list[str]:
    """The lines of the sweep's refused.txt: attnexp's jobs wrote it, but anyone who can write the sweep
    folder could have, so it is read bounded (1 MB, never a pipe) and kept to printable characters."""
    from attnexp.config.files import FileRefused, read_text

    try:
        text = read_text(root / layout.REFUSED, 1 << 20)
    except FileRefused:
        return []
    return ["".join(c for c in line if c.isprintable()) for line in text.splitlines()]


def nothing_ran(root: Path, subdir: str | None = ".hydra") -> bool:
    """Whether the sweep was an Optuna launch that found its study finished (and ran no job): its
    folder, if anything made one, is removed while it holds no job, so `compare` never picks it."""
    from attnexp.config.files import FileRefused, read_json
    from hydra_plugins.attnexp_optuna_sweeper.sweeper import RESULTS

    try:  # what the sweeper wrote into the sweep folder
        said = read_json(root / RESULTS, 1 << 20)
    except FileRefused:
        return False
    if not (isinstance(said, dict) and said.get("nothing_ran") is True) or sweep_jobs(root, subdir):
        return False
    if root.is_dir() and not any(p for p in root.rglob("*") if p.is_file() and p.name not in ("multirun.yaml", RESULTS)):
        shutil.rmtree(root, ignore_errors=True)
    return True


def sweep_jobs(root: Path, subdir: str | None = ".hydra") -> list[Path]:
    """The job folders of a sweep, however deep (an override value with a '/' nests them): each holds
    what a job writes once the folder is its own (its hydra.output_subdir `subdir`, the run's lock, its
    summary.json), so a job whose process died at once is found too."""
    found = {p.parent for name in (layout.LOCK, summary.NAME) for p in root.rglob(name) if p.is_file()}
    if subdir and not Path(subdir).is_absolute():
        depth = len(Path(subdir).parts)
        found |= {Path(*p.parts[:-depth]) for p in root.glob(f"**/{subdir}") if p.is_dir()}
    return sorted(p for p in found if p != root)


def finish_sweep(root: Path, again: list[str] = (), subdir: str | None = ".hydra") -> int:
    """The sweep's table (results.md, .csv) and its failures, read from the jobs' summary.json
    files: the jobs may have run in other processes (submitit). A job folder without a usable
    summary (its process died before writing one) counts as failed, and so does a sweep with no job.
    A job that did not finish (interrupted: e.g. a SLURM job requeued max_num_timeout times; or
    killed) is listed with the command that continues the sweep, and the sweep exits non-zero too, as
    does a job refused its folder (another run's), which said so in the sweep's refused.txt."""
    from attnexp.results.compare import CompareError, write_sweep_table

    failures, unfinished, jobs = refusals(root), [], sweep_jobs(root, subdir)
    for folder in jobs:
        try:
            s = summary.read(folder / summary.NAME)
        except summary.SummaryError as e:
            failures.append(f"{folder.relative_to(root)}: summary.json: {e} (its process died?)")
            continue
        if s["status"] in FAILURES:
            failures.append(f"{folder.relative_to(root)}: {s['status']}: {s.get('error') or ''}")
        elif s["status"] in (Status.INTERRUPTED, Status.RUNNING):
            unfinished.append(f"{folder.relative_to(root)}: {s['status']}: {s.get('error') or 'its process was killed'}")
    if not jobs:
        failures.append(f"{root}: no job folder below it")
    try:
        table = write_sweep_table(root)
        print(f"attnexp: the sweep's runs side by side: {table}; a report: python -m attnexp compare "
              f"{shlex.quote(str(root))} report={shlex.quote(str(root))}/report.html", flush=True)
    except CompareError:
        pass
    if failures:
        print(f"attnexp: {len(failures)} run(s) of the sweep failed (see their summary.json):", file=sys.stderr)
        for f in failures:
            print(f"  {f}", file=sys.stderr)
    if unfinished:
        again = [o for o in again if not o.startswith(("resume=", "hydra.sweep.dir="))]
        cmd = " ".join(["python -m attnexp train -m", *map(shlex.quote, again), f"hydra.sweep.dir={shlex.quote(str(root))}",
                        "resume=auto"])
        print(f"attnexp: {len(unfinished)} run(s) of the sweep did not finish:", file=sys.stderr)
        for f in unfinished:
            print(f"  {f}", file=sys.stderr)
        print(f"attnexp: continue them (finished runs are not trained again) with: {cmd}", file=sys.stderr)
    return SWEEP_FAILED if failures or unfinished else 0
