"""A sweep launched again into the same folder (hydra.sweep.dir=ROOT, as the "continue them" line a
stopped sweep prints). Before: an Optuna study's trial folders were named by the launch's job index,
so the second launch's trials 2 and 3 ran in trial0/ and trial1/, found those runs completed
(resume=auto), and told the study trials 0 and 1's values for other settings; and a sweep whose every
job was refused its folder (an earlier launch's runs) exited 0, its failures only in the log."""

from __future__ import annotations

import pytest

from attnexp.cli import main

SMALL = ["trainer.max_epochs=1", "data.n_sentences=100", "logger=none", "maps.enabled=false", "test=false",
         "trainer.enable_progress_bar=false"]


def launch(tmp_path, *args: str) -> int:
    return main(["train", "-m", "hparams_search=optuna", "hydra.sweeper.study_name=s", f"hydra.sweep.dir={tmp_path / 'sweep'}",
                 *SMALL, *args])


@pytest.mark.parametrize("launcher", [[], ["hydra/launcher=submitit_local"]], ids=["basic", "submitit_local"])
def test_a_sweep_whose_jobs_are_refused_their_folders_fails_and_says_so(launcher, tmp_path, monkeypatch, capsys):
    """Each job is refused in the process that runs it (submitit's: another one), and the sweep's end
    hears of it through the sweep folder; the earlier runs' logs and Hydra's .hydra/ files of them are
    left as they were (the refusal was appended to the run's train.log)."""
    if launcher:
        pytest.importorskip("submitit", reason="needs submitit (pip install -e '.[cluster]')")
    monkeypatch.chdir(tmp_path)
    sweep = ["train", "-m", "seed=1,2", f"hydra.sweep.dir={tmp_path / 'sweep'}", *launcher, *SMALL]
    assert main(sweep) == 0
    kept = [*(tmp_path / "sweep").rglob("*.ckpt"), *(tmp_path / "sweep").glob("*/.hydra/*.yaml"),
            *(tmp_path / "sweep").glob("*/*.log")]
    before = {p: p.read_bytes() for p in kept}
    capsys.readouterr()
    assert main(sweep) == 1  # the same command again, without resume=auto: nothing of the first is touched
    err = capsys.readouterr().err
    assert "2 run(s) of the sweep failed" in err and err.count("already holds a run") >= 2 and "resume=auto" in err
    assert before and all(p.read_bytes() == b for p, b in before.items())


def test_a_continued_studys_trials_each_run_in_a_folder_of_their_own(tmp_path, monkeypatch):
    optuna = pytest.importorskip("optuna", reason="needs Optuna (pip install -e '.[sweep]')")
    monkeypatch.chdir(tmp_path)
    db = f"sqlite:///{tmp_path / 's.db'}"
    assert launch(tmp_path, f"hydra.sweeper.storage={db}", "hydra.sweeper.n_trials=2") == 0
    assert launch(tmp_path, f"hydra.sweeper.storage={db}", "hydra.sweeper.n_trials=4", "resume=auto") == 0
    trials = optuna.load_study(study_name="s", storage=db).trials
    assert [t.user_attrs["run_dir"] for t in trials] == [str(tmp_path / "sweep" / f"trial{t.number}") for t in trials]
    from attnexp.results import summary

    for t in trials:  # the value told is the run's in the trial's folder, trained with the trial's settings
        s = summary.read(tmp_path / "sweep" / f"trial{t.number}" / "summary.json")
        assert s["metrics"]["best"]["value"] == pytest.approx(t.value)
        assert {f"{k}={v}" for k, v in t.params.items()} <= set(s["overrides"])


def test_a_trial_folder_holding_another_trials_run_is_not_its_result(tmp_path, monkeypatch, capsys):
    """Two studies in memory (no storage: numbering starts again) into one sweep folder with resume=auto:
    the second's trial 0 finds the first's trial0/ completed with other settings. It is not run there,
    and the study is not told that run's value."""
    pytest.importorskip("optuna", reason="needs Optuna (pip install -e '.[sweep]')")
    monkeypatch.chdir(tmp_path)
    assert launch(tmp_path, "hydra.sweeper.storage=null", "hydra.sweeper.n_trials=1", "hydra.sweeper.seed=1") == 0
    trial0 = tmp_path / "sweep" / "trial0"
    before = {p: p.read_bytes() for p in [trial0 / "summary.json", trial0 / "train.log", *(trial0 / ".hydra").iterdir()]}
    assert launch(tmp_path, "hydra.sweeper.storage=null", "hydra.sweeper.n_trials=1", "hydra.sweeper.seed=2",
                  "resume=auto") != 0
    assert "holds a run made with other settings" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in before} == before  # left as it was: its record and Hydra's files of it


@pytest.mark.parametrize("args", [["hydra.run.dir="], ["paths.log_dir="], ["-m", "seed=1,2", "hydra.sweep.dir="],
                                  ["-m", "seed=1,2", "paths.sweep_dir="]])
def test_an_empty_folder_setting_is_one_line_not_the_working_folder_or_the_root(args, tmp_path, monkeypatch, capsys):
    """`hydra.run.dir=$OUT` with $OUT unset: the run went into the folder you ran in (a sweep's results.md
    there, its table gathering every run below it); `paths.log_dir=$LOGS` unset put it under / itself
    (/2026-11-28/..., written where the user may write there, as root in a container)."""
    monkeypatch.chdir(tmp_path)
    assert main(["train", *args, *SMALL]) == 2
    err = capsys.readouterr().err
    key = next(a for a in args if a.endswith("="))[:-1]
    assert err.count("\n") == 1 and f"{key} is empty" in err and f"{key}=DIR" in err, err
    assert list(tmp_path.iterdir()) == []


def test_a_planted_refused_txt_is_cleared_by_the_launch_and_read_as_a_strangers_file(tmp_path, monkeypatch, capsys):
    """refused.txt (config/layout.REFUSED) is written by a sweep's jobs and read by its end; anyone who can
    write the sweep folder can plant one. A launch clears it before its jobs run; read, it is bounded (1 MB),
    never waited on (a pipe), and printed with printable characters only (no terminal escapes)."""
    import os

    from attnexp.cli.sweep_end import finish_sweep
    from attnexp.config import layout

    monkeypatch.chdir(tmp_path)
    root = tmp_path / "sweep"
    root.mkdir()
    (root / layout.REFUSED).write_text("not run: planted\n")
    assert main(["train", "-m", "seed=1", f"hydra.sweep.dir={root}", *SMALL]) == 0  # cleared: not this launch's
    assert "planted" not in capsys.readouterr().err
    (root / layout.REFUSED).write_text("not run: \x1b[2Jwiped\x07 screen\n")
    assert finish_sweep(root) == 1
    err = capsys.readouterr().err
    assert "not run: [2Jwiped screen" in err and "\x1b" not in err and "\x07" not in err
    (root / layout.REFUSED).write_bytes(b"x" * (2 << 20))
    assert finish_sweep(root) == 0 and "xxxx" not in capsys.readouterr().err  # over the bound: not read
    (root / layout.REFUSED).unlink()
    os.mkfifo(root / layout.REFUSED)
    assert finish_sweep(root) == 0  # a pipe is not opened for reading and waited on


def test_a_jobs_hydra_files_say_the_output_subdir_as_given(tmp_path):
    """The job writes Hydra's three files itself (compat/hydra.job_files); the subdir in its hydra.yaml
    was the folder's last name (`x` for hydra.output_subdir=meta/x)."""
    import yaml

    from attnexp.compat.hydra import job_files
    from attnexp.launch.compose import compose

    cfg = compose(["seed=3"], tmp_path)
    task = {k: v for k, v in cfg.items() if k != "hydra"}
    for path, text in job_files(task, tmp_path, "meta/x").items():
        path.write_text(text)
    hydra = yaml.safe_load((tmp_path / "meta" / "x" / "hydra.yaml").read_text())["hydra"]
    assert hydra["output_subdir"] == "meta/x"
    assert yaml.safe_load((tmp_path / "meta" / "x" / "config.yaml").read_text())["seed"] == 3
