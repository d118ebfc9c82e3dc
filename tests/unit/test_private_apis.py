"""What attnexp/compat/{hydra,optuna,submitit,sklearn,datasets}.py take from those libraries' private
parts, checked against the installed versions as tests/unit/test_lightning_private.py checks
Lightning's: an upgrade that moves one fails here, naming it, before a sweep or a data load does.
Before, these uses sat in six files outside compat/ with no such check."""

from __future__ import annotations

import inspect

import pytest


def test_hydras_parser_search_path_loader_and_sweep_expansion():
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from attnexp.compat import hydra as h
    from attnexp.config.paths import conf_dir
    from attnexp.launch.compose import register_schemas

    register_schemas()  # as sweep_jobs does: Hydra's plugin scan cannot import attnexp's sweeper dataclasses itself
    flags = h.args_parser().parse_args(["-m", "--cfg", "job", "seed=1,2"])
    assert flags.multirun and flags.cfg == "job" and flags.overrides == ["seed=1,2"]
    path = h.config_search_path(str(conf_dir()))
    assert any(str(conf_dir()) in e.path for e in path.get_path())
    loader = h.config_loader(path)
    parsed = OverridesParser.create(config_loader=loader).parse_overrides(["seed=1,2", "model.n_layers=1,2"])
    assert sorted(map(tuple, h.sweep_jobs(parsed))) == sorted(
        [("seed=1", "model.n_layers=1"), ("seed=1", "model.n_layers=2"), ("seed=2", "model.n_layers=1"),
         ("seed=2", "model.n_layers=2")])


def test_hydras_run_as_hydra_main_starts_it():
    """compat.hydra.run is _run_hydra's run path less its get_mode, and _run_hydra itself for the flags
    Hydra answers: the calls it makes keep their names."""
    from hydra._internal import utils
    from hydra._internal.hydra import Hydra

    run_hydra = inspect.getsource(utils._run_hydra)
    assert "hydra.get_mode(" in run_hydra and "_run_app(" in run_hydra and "create_main_hydra2(" in run_hydra
    assert list(inspect.signature(utils._run_app).parameters) == ["run", "multirun", "mode", "hydra", "config_name",
                                                                  "task_function", "overrides"]
    assert {"task_name", "config_search_path"} <= set(inspect.signature(Hydra.create_main_hydra2).parameters)
    assert list(inspect.signature(utils._run_hydra).parameters)[:5] == ["args", "args_parser", "task_function",
                                                                      "config_path", "config_name"]


def test_optunas_study_storage_and_trial_ids(tmp_path):
    optuna = pytest.importorskip("optuna", reason="needs Optuna (pip install -e '.[sweep]')")
    from attnexp.compat import optuna as o

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}", study_name="s")
    asked = [study.ask(), study.ask()]
    ids = o.trial_ids(asked)
    storage = o.study_storage(study)
    assert [storage.get_trial(i).number for i in ids] == [0, 1]
    again = o.trial_of(optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 's.db'}"), 1)
    again.report(0.5, step=0)  # the job's pruning callback reports through it
    assert storage.get_trial(ids[1]).intermediate_values == {0: 0.5}


def test_submitits_slurm_watcher_command_is_what_quiet_sacct_wraps():
    pytest.importorskip("submitit", reason="needs submitit (pip install -e '.[cluster]')")
    from submitit.slurm.slurm import SlurmInfoWatcher

    from attnexp.compat.submitit import quiet_sacct

    watcher = SlurmInfoWatcher(delay_s=60)
    assert callable(watcher._make_command) and hasattr(watcher, "num_calls"), "SlurmInfoWatcher changed"
    watcher._registered = {"1"}
    first = watcher._make_command()
    quiet_sacct(watcher)
    watcher._num_calls = 1  # num_calls is a read-only property over it
    assert first[0] == "sacct" and watcher._make_command() == ["sh", "-c", '"$@" 2>/dev/null', "sh", *first]


def test_submitits_watcher_state_is_what_squeue_when_sacct_cannot_fills_in():
    """squeue_when_sacct_cannot reads and writes the watcher's _registered, _finished and _info_dict
    around its update(); a job squeue no longer lists (here: no controller knows it) counts as done."""
    pytest.importorskip("submitit", reason="needs submitit (pip install -e '.[cluster]')")
    from submitit.slurm.slurm import SlurmInfoWatcher

    from attnexp.compat import submitit as s

    watcher = SlurmInfoWatcher(delay_s=60)
    assert isinstance(watcher._info_dict, dict) and isinstance(watcher._finished, set), "SlurmInfoWatcher changed"
    watcher._make_command = lambda: None  # no sacct call: its state stays UNKNOWN, as without accounting
    s.squeue_when_sacct_cannot(watcher)
    watcher.register_job("7_1")
    real = s.squeue_states
    s.squeue_states = lambda ids: {} if ids == {"7"} else None  # squeue lists none of them (this is no cluster)
    try:
        watcher.update()
    finally:
        s.squeue_states = real
    assert watcher.get_state("7_1", mode="cache") == s.LEFT_QUEUE and watcher.is_done("7_1", mode="cache")
    assert "7_1" in watcher._finished


def test_sklearns_newsgroup_strippers():
    pytest.importorskip("sklearn", reason="needs scikit-learn (pip install -e '.[newsgroups]')")
    from attnexp.compat.sklearn import newsgroup_strippers

    header, footer, quoting = newsgroup_strippers()
    post = "From: a@b.c\nSubject: x\n\n> quoted\nbody\n--\nsig"
    assert "From:" not in header(post) and "> quoted" not in quoting(post) and "sig" not in footer(post)


def test_datasets_fingerprint_follows_the_contents():
    import datasets

    from attnexp.compat.datasets import fingerprint

    a = datasets.Dataset.from_dict({"text": ["x", "y"]})
    assert isinstance(fingerprint(a), str) and fingerprint(a) != fingerprint(a.map(lambda r: {"text": r["text"] + "!"}))
    assert "_fingerprint" in inspect.getsource(datasets.Dataset.__init__)


def test_no_private_part_of_these_libraries_is_used_outside_compat():
    import re
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    private = re.compile(r"hydra\._internal|\._storage\b|\._trial_id\b|\._study_id\b|_make_command|_twenty_newsgroups"
                         r"|\._fingerprint\b")
    found = [f"{p.relative_to(repo)}:{i}" for root in ("attnexp", "hydra_plugins") for p in (repo / root).rglob("*.py")
             if "compat" not in p.parts for i, line in enumerate(p.read_text().splitlines(), 1) if private.search(line)]
    assert found == [], f"private library parts used outside attnexp/compat/: {found}"


def test_hydras_submitit_launcher_is_what_lost_jobs_in_one_line_wraps():
    """lost_jobs_in_one_line wraps BaseSubmititLauncher.launch and turns submitit's UncompletedJobError,
    whose text lost_job_line reads, into Hydra's one-line CompactHydraException."""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="needs hydra-submitit-launcher ('.[cluster]')")
    from submitit.core.utils import UncompletedJobError

    from attnexp.compat import submitit as s
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import BaseSubmititLauncher

    assert "launch" in vars(BaseSubmititLauncher) and issubclass(UncompletedJobError, Exception)
    # submitit's own words for a job without a result (core.Job._get_outcome_and_result)
    text = ("Job 12_3 (task: 0) with path /runs/.submitit/12_3/12_3_0_result.pkl\nhas not produced any output "
            "(state: LEFT_QUEUE)\nError stream produced:\n" + "-" * 40 + "\n/bin/sh: python: not found\n")
    line = s.lost_job_line(UncompletedJobError(text))
    assert "\n" not in line and line.startswith("SLURM job 12_3 ended without a result (state LEFT_QUEUE: squeue")
    assert "/runs/.submitit/12_3/12_3_0_log.err" in line and "its last error line: /bin/sh: python: not found" in line
