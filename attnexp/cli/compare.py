"""`python -m attnexp compare [DIR ...] [sort=KEY] [csv=PATH] [md=PATH] [report=PATH.html]`."""

from __future__ import annotations

import sys
from pathlib import Path

from attnexp.config import ConfigError, layout
from attnexp.config.checks import unwritable
from attnexp.config.paths import default_paths, write_whole
from attnexp.config.secrets import hide_password, take_passwords
from attnexp.results.compare import CompareError, markdown, newest_sweep, read, tables, write_csv

USAGE = """usage: python -m attnexp compare [DIR ...] [sort=KEY] [tag=NAME] [csv=PATH] [md=PATH] [report=PATH.html]

  DIR          folders holding runs (a multirun/<date>/<time> sweep, outputs/, one run); every
               summary.json below them is read. Default: the newest sweep under ./multirun.
  sort=KEY     order rows by a column: best (the default, each run's checkpoint.monitor, best
               first), a test metric such as test/acc, a validation metric such as val/acc (its
               last value, in a column of its own), or time, tokens/s, run
  tag=NAME     only the runs trained with that tag (tags=[NAME,...])
  study=NAME storage=URL
               every run of an Optuna study, whichever worker (launch, node) ran it: the study's
               trials name their run folders (storage as hydra.sweeper.storage: sqlite:///FILE,
               postgresql+psycopg://..., journal:FILE)
  csv=PATH     also write the table as CSV (md=PATH: as Markdown)
  report=PATH  a self-contained HTML report: the table, curves with seed bands, quality against
               throughput and memory, per-head statistics, links to every run's viewer

Runs that differ only in `seed` are grouped: mean, std, n and a 95% interval over seeds; the best
group is marked, and `vs best (<metric>)` gives Welch's t-test p over seeds on that metric ("~" when p > 0.05: within noise).

example:
  python -m attnexp train -m attention=causal,alibi,linear seed=0,1,2
  python -m attnexp compare report=report.html   # 3 groups of 3 seeds
"""

def study_runs(name: str | None, url: str | None) -> list[Path]:
    """The run folders of every trial of an Optuna study (each trial records its `run_dir`), whichever
    launch ran it. The storage is opened read-only (nothing created, every file left as it was); a
    study, storage or trial folder that cannot be read is one line, a password never shown."""
    if not name or not url:
        raise CompareError("give both study=NAME and storage=URL (as hydra.sweeper.storage) to compare a study's runs")
    try:
        import optuna
    except ImportError:
        raise CompareError("study= needs Optuna: pip install 'attnexp[sweep]'") from None
    from attnexp.config.study import StudyStorage
    from hydra_plugins.attnexp_optuna_sweeper._study_storage import SweepError, open_to_read

    where = StudyStorage.parse(url)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        trials = optuna.load_study(study_name=name, storage=open_to_read(where)).get_trials(deepcopy=False)
    except SweepError as e:
        raise CompareError(str(e)) from None
    except KeyError:
        raise CompareError(f"no study {name!r} in {where.shown}") from None
    except Exception as e:  # noqa: BLE001 - SQLAlchemy's, Optuna's and the drivers' own errors
        raise CompareError(f"cannot read {where.shown}: {hide_password(' '.join(str(e).split()))[:120]}") from None
    folders = [Path(str(t.user_attrs["run_dir"])) for t in trials if t.user_attrs.get("run_dir")]
    if not folders:
        raise CompareError(f"study {name!r} in {where.shown} has no trial with a run folder yet")
    return [f for f in folders if (f / layout.SUMMARY).is_file()] or folders


def compare_cli(argv: list[str]) -> int:
    if any(a in ("-h", "--help", "help") for a in argv):
        print(USAGE)
        return 0
    argv, problem = take_passwords(argv)  # a server's password: to PGPASSWORD, never shown
    if problem:
        print(f"attnexp compare: {problem}", file=sys.stderr)
        return 2
    opts, paths = {}, []
    for a in argv:  # a run folder may hold "=" (Hydra's sweep dirs): only these keys are options
        key, eq, val = a.partition("=")
        if eq and key in ("sort", "csv", "md", "report", "tag", "study", "storage"):
            opts[key] = val
        else:
            paths.append(Path(a))
    try:
        for key in ("csv", "md", "report"):  # said before anything is read, not as a traceback after the table
            if key in opts and (said := output_problem(key, opts[key])):
                raise CompareError(said)
        if "study" in opts or "storage" in opts:
            paths += study_runs(opts.get("study"), opts.get("storage"))
        if not paths:
            paths = [newest_sweep(Path(str(default_paths()["sweep_dir"])))]
            print(f"attnexp compare: the newest sweep, {paths[0]}", file=sys.stderr)
        summaries = read(paths)
        if "tag" in opts:  # only the runs labelled tags=[..., NAME, ...]
            summaries = [(p, s) for p, s in summaries if opts["tag"] in (s.get("tags") or [])]
            if not summaries:
                raise CompareError(f"no run under {', '.join(map(str, paths))} has the tag {opts['tag']!r}")
        t, cols, rows, gcols, grows = tables(summaries, opts.get("sort", "best"))
    except CompareError as e:
        print(f"attnexp compare: {e}", file=sys.stderr)
        return 2
    if grows:
        print(f"{len(grows)} groups of seeds ({t.monitor or 'best'}: mean ± std (n); vs best: Welch's t-test over "
              f"seeds, ~ = within noise, p > 0.05)\n")
        print(markdown(gcols, grows) + "\n")
    print(markdown(cols, rows))
    from attnexp.results.report import write_report

    writers = {"csv": lambda p: write_csv(p, *(gcols, grows) if grows else (cols, rows)),
               "md": lambda p: write_whole(p, (markdown(gcols, grows) + "\n\n" if grows else "") + markdown(cols, rows) + "\n"),
               "report": lambda p: write_report(p, t, cols, rows, gcols, grows)}
    for key in (k for k in writers if k in opts):
        try:
            Path(opts[key]).parent.mkdir(parents=True, exist_ok=True)
            writers[key](Path(opts[key]))
        except (OSError, ConfigError) as e:
            print(f"attnexp compare: cannot write {key}={opts[key]}: {getattr(e, 'strerror', None) or e}", file=sys.stderr)
            return 1
        print(f"wrote {opts[key]}")
    return 0


def output_problem(key: str, value: str) -> str | None:
    """One line when `key=value` names no file this user can write (empty: an unset variable; a folder;
    a path through a file; a read-only folder), else None."""
    if not value.strip() or Path(value).is_dir():
        return f"{key}={value}: give the file to write, e.g. {key}=runs.{'html' if key == 'report' else key}"
    return unwritable(Path(value).parent, key, f"the {key}= file into", fix=f"{key}=PATH")
