"""The command line behaves as a Hydra app's does (issue 50). Before: `train -m attention=causal,alibi
--cfg job -p attention` and `train -m experiment=a,b --config-dir conf ...` failed with
`unrecognized arguments: hydra.sweep.dir=...` (a key the user never typed, appended after the flags);
overrides after a flag's value were refused; `-m --cfg job` was Hydra's ValueError traceback; the
documented command-line search space `-m hparams_search=optuna 'optim.lr=tag(log, interval(...))'`
was refused as "BasicSweeper does not support sweep type" (the sweeper guessed from the strings);
`hparams_search=optuna` without -m silently did one ordinary run; `trainer=ddp_sim
trainer.devices=1` trained one process without a word."""

from __future__ import annotations

import pytest

from attnexp.cli import main
from attnexp.cli.train import sweep_arguments
from attnexp.compat.hydra import args_parser


def said(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["train", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_sweeps_command_line_is_rebuilt_as_hydra_parses_it(tmp_path):
    argv = ["-m", "experiment=copy,sort", "--config-dir", str(tmp_path), "trainer.max_epochs=1", "--cfg", "job", "-p",
            "model", "seed=3"]
    from attnexp.launch.command_line import precheck
    from attnexp.launch.plan import Plan

    plan = Plan.of(argv)
    flags = plan.flags
    assert flags.overrides == ["experiment=copy,sort", "trainer.max_epochs=1", "seed=3"] and flags.config_dir == str(tmp_path)
    assert precheck(plan.overrides, True, plan=plan) is None
    rebuilt, root = sweep_arguments(argv, plan)
    parsed = args_parser().parse_args(rebuilt)  # Hydra's own parse of sys.argv, not intermixed
    assert parsed.overrides[:3] == flags.overrides and f"hydra.sweep.dir={root}" in parsed.overrides
    assert (parsed.multirun, parsed.cfg, parsed.package, parsed.config_dir) == (True, "job", "model", str(tmp_path))


def test_flags_and_overrides_in_any_order(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine" / "experiment").mkdir(parents=True)
    (tmp_path / "mine" / "experiment" / "deep.yaml").write_text("# @package _global_\nmodel:\n  n_layers: 5\n")
    code, out, err = said(capsys, "--cfg", "job", "experiment=deep", "-p", "model", "--config-dir", str(tmp_path / "mine"),
                          "model.d_model=48")
    assert code == 0, err
    assert "n_layers: 5" in out and "d_model: 48" in out


@pytest.mark.parametrize("args, line", [
    (["-m", "attention=causal,alibi", "--cfg", "job", "-p", "attention"], "--cfg shows one run's config"),
    (["hparams_search=optuna"], "hparams_search=optuna searches over many runs: add -m"),
    (["trainer=ddp_sim", "trainer.devices=1"], "trainer.strategy=ddp with trainer.devices=1 is one process"),
])
def test_contradictions_are_one_line(args, line, tmp_path, capsys, monkeypatch):
    pytest.importorskip("optuna")
    monkeypatch.chdir(tmp_path)
    code, _, err = said(capsys, *args)
    assert code == 2 and line in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert not any(tmp_path.iterdir())  # no run folder


def test_the_documented_command_line_search_space_is_taken(tmp_path, monkeypatch):
    from attnexp.launch.command_line import precheck

    pytest.importorskip("optuna")
    monkeypatch.chdir(tmp_path)
    assert precheck(["hparams_search=optuna", "optim.lr=tag(log, interval(1e-4, 1e-2))"], multirun=True) is None
    assert precheck(["hparams_search=optuna", "model.d_model=choice(32, 64)"], multirun=True) is None


def test_a_misspelt_group_gets_a_suggestion(tmp_path, capsys, monkeypatch):
    """Before: `atention=rotary` got `atention is not a config key` and no suggestion."""
    monkeypatch.chdir(tmp_path)
    code, _, err = said(capsys, "atention=rotary")
    assert code == 2 and "did you mean attention=rotary?" in err and err.count("\n") == 1, err


class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        import os

        return os.system, (f"touch {self.marker}",)


def test_hydras_experimental_rerun_is_refused_before_its_pickle_is_read(tmp_path, capsys, monkeypatch):
    """`train --experimental-rerun FILE` went to Hydra, which unpickles FILE: a planted pickle ran its
    code (then Hydra's traceback). A rerun file is a stranger's file like a checkpoint: data, never
    code, so attnexp refuses the flag in one line and names how to rerun a run."""
    import pickle

    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "ran"
    (tmp_path / "config.pickle").write_bytes(pickle.dumps(_Payload(marker)))
    code, out, err = said(capsys, "--experimental-rerun", str(tmp_path / "config.pickle"))
    assert code == 2 and not marker.exists(), "the pickle's payload ran"
    assert err.strip().startswith("attnexp: config error: attnexp does not take Hydra's --experimental-rerun")
    assert len(err.strip().splitlines()) == 1 and "overrides.yaml" in err and not list(tmp_path.glob("outputs"))


@pytest.mark.parametrize("flag", [["--config-name", "other"], ["-cn", "other"], ["--config-path", "MINE"], ["-cp", "MINE"]])
@pytest.mark.parametrize("show", [[], ["--cfg", "job"]], ids=["train", "cfg"])
def test_a_primary_config_of_the_users_is_refused_in_one_line(flag, show, tmp_path, capsys, monkeypatch):
    """Hydra's --config-name and --config-path replace the primary config. Before, --cfg showed the
    user's (Hydra answers it) while the run itself trained attnexp's config.yaml without a word: the
    flag was silently dropped. The way to one's own settings is an experiment beside attnexp's."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "other.yaml").write_text("seed: 7\n")
    flag = [f.replace("MINE", str(tmp_path / "mine")) for f in flag]
    code, out, err = said(capsys, "--config-dir", "mine", *flag, *show, "trainer.max_epochs=1", "data.n_sentences=100",
                          "logger=none", "maps.enabled=false", "test=false")
    assert code == 2 and err.count("\n") == 1 and "experiment=NAME" in err and flag[0] in err, err
    assert not (tmp_path / "outputs").exists() and out == ""


@pytest.mark.parametrize("args, says", [(["--foo"], "unrecognized arguments: --foo"),
                                        (["--cfg"], "argument --cfg/-c: expected one argument"),
                                        (["--cfg", "jobs"], "invalid choice: 'jobs'")])
def test_a_flag_hydras_parser_refuses_is_one_line(args, says, capsys):
    """Before, argparse's own exit: seven lines of usage from a program named `__main__.py`."""
    code, out, err = said(capsys, *args)
    assert code == 2 and err.count("\n") == 1 and says in err and "--hydra-help" in err and "__main__" not in err, err
