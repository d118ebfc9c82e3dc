"""The third attack pass (issue 41) and the habits users bring (issue 43): small files that asked for
minutes or gave tracebacks, stores of other tools, signals during eval, lightning-hydra-template's
keys. Each was a traceback, a silent wrong result or a missing key before; each is one line now."""

from __future__ import annotations

import json

import pytest

from helpers.forged import encoder, forged
from helpers.runs import run_of

# -- the third attack pass: small files that asked for minutes or gave tracebacks (issue 41)


def nan_weights(data):
    key = next(k for k, v in data["state_dict"].items() if v.is_floating_point())
    data["state_dict"][key][0] = float("nan")


def no_unk_wordpiece(data):
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordPiece(vocab={"[PAD]": 0, "[CLS]": 1, "[SEP]": 2, "the": 3, "dog": 4}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    encoder(data).update(kind="tokenizer", payload=tok.to_str())


def test_a_checkpoints_recorded_data_is_held_to_the_command_lines_limits(trained, tmp_path, capsys):
    """Before: a 1.4 MB checkpoint whose data settings asked for n_sentences = 10**9 made `eval
    split=val` generate a corpus for minutes (2.6 GB and growing)."""
    import time

    from attnexp.cli import main

    def huge(data):
        data["data_identity"]["settings"]["n_sentences"] = 10**9

    t0 = time.time()
    assert main(["eval", f"ckpt={forged(trained, 'huge-data', huge)}", "split=val", f"out={tmp_path / 'e'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert "data.n_sentences=1,000,000,000 is beyond attnexp's limit of 1,000,000 generated sentences" in err, err
    assert "\n" not in err and time.time() - t0 < 30
    assert main(["train", "data.n_sentences=2000000", "--cfg", "job"]) == 2  # the same limit on the command line
    assert "beyond attnexp's limit" in capsys.readouterr().err


def test_a_checkpoint_never_chooses_a_file_eval_reads(trained, tmp_path, capsys):
    """Issue 49. Before: a checkpoint whose recorded data named corpus=/etc/passwd made `eval` read that
    file (its split sizes appeared in the refusal). Now a recorded file, folder or hub name is read
    only when the user gives it again; a named pipe stands in for the file, so a read would hang."""
    import os

    from attnexp.cli import main

    pipe = tmp_path / "planted"
    os.mkfifo(pipe)

    def elsewhere(data):
        data["data_identity"]["location"]["corpus"] = str(pipe)
        data["data_identity"]["settings"]["tokenizer"] = str(pipe)  # a location key hidden among the settings

    ckpt = forged(trained, "elsewhere", elsewhere)
    assert main(["eval", f"ckpt={ckpt}", "split=val", f"out={tmp_path / 'e'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert f"was trained on data.corpus={str(pipe)!r}; a checkpoint never chooses a file attnexp reads" in err, err
    assert "data.corpus=PATH" in err and "\n" not in err and not (tmp_path / "e").exists()
    # the same checkpoint with its recorded data given again by the user: the recipe's own data, evaluated
    ok = forged(trained, "default-again", lambda data: data["data_identity"]["location"].update(corpus=None))
    assert main(["eval", f"ckpt={ok}", "split=val", f"out={tmp_path / 'ok'}"]) == 0, capsys.readouterr().err


def test_a_wordpiece_tokenizer_without_its_unknown_token_is_one_line(trained, capsys):
    """Before: `maps ckpt=...` of a checkpoint whose embedded WordPiece tokenizer has no [UNK] gave a
    traceback from encode ("Missing [UNK] token from the vocabulary")."""
    from attnexp.cli import main

    assert main(["maps", f"ckpt={forged(trained, 'no-unk', no_unk_wordpiece)}", "text=the cat"]) == 2
    err = capsys.readouterr().err.strip()
    assert "its WordPiece model names '[UNK]' for unknown text, which is not in its vocabulary" in err, err
    assert "\n" not in err


def precompiled_garbage(data):
    """A tokenizer whose normalizer is a Precompiled charsmap of four junk bytes: the tokenizers
    library panics building it (pyo3's PanicException, a BaseException, after Rust's own lines)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel(vocab={"[PAD]": 0, "[CLS]": 1, "[SEP]": 2, "[UNK]": 3, "the": 4}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    d = json.loads(tok.to_str())
    d["normalizer"] = {"type": "Precompiled", "precompiled_charsmap": "AAAA"}
    encoder(data).update(kind="tokenizer", payload=json.dumps(d))


def test_a_tokenizer_the_library_panics_on_is_one_line(trained, tmp_path, capfd):
    """Issue 52. Before: Rust's panic lines on stderr, then pyo3's PanicException (a BaseException:
    no `except Exception` caught it) under a traceback, from a checkpoint's tokenizer and from
    data.tokenizer=FILE alike."""
    from attnexp.cli import main

    bad = forged(trained, "panics", precompiled_garbage)
    assert main(["maps", f"ckpt={bad}", "text=the cat", f"out={tmp_path / 'm'}"]) == 2
    err = capfd.readouterr().err.strip()
    assert err.startswith(f"attnexp maps: ckpt={str(bad)!r} holds a tokenizer that cannot be read (the tokenizers "
                          "library failed on it: Precompiled"), err
    assert "\n" not in err and "panicked" not in err
    from tokenizers import Tokenizer, models

    tok = Tokenizer(models.WordLevel(vocab={"[PAD]": 0, "[CLS]": 1, "[SEP]": 2, "[UNK]": 3}, unk_token="[UNK]"))
    d = json.loads(tok.to_str())
    d["normalizer"] = {"type": "Precompiled", "precompiled_charsmap": "AAAA"}
    (tmp_path / "tokenizer.json").write_text(json.dumps(d))
    from attnexp.config import ConfigError
    from attnexp.data.tokenizer import read_tokenizer

    with pytest.raises(ConfigError, match="is not a tokenizer.json tokenizers can read .the tokenizers library failed"):
        read_tokenizer(str(tmp_path / "tokenizer.json"), "data.tokenizer")
    assert "panicked" not in capfd.readouterr().err


def test_weights_that_are_not_numbers_are_said_by_every_reader(trained, tmp_path, capsys):
    """Before: `sample` gave a traceback ("probability tensor contains inf, nan"), and `maps` and
    `api.load().scores()` drew and returned NaN without a word."""
    from attnexp import api
    from attnexp.cli import main
    from attnexp.config import ConfigError

    bad = forged(trained, "nan", nan_weights)
    for cmd in (["sample", f"ckpt={bad}", "prompt=the dog"], ["maps", f"ckpt={bad}", "text=the dog", f"out={tmp_path}"],
                ["eval", f"ckpt={bad}", "split=val", f"out={tmp_path / 'e'}"]):
        assert main(cmd) == 2, cmd
        err = capsys.readouterr().err.strip()
        assert "holds weights that are not numbers (NaN or inf in " in err and "\n" not in err, (cmd, err)
    with pytest.raises(ConfigError, match="holds weights that are not numbers"):
        api.load(bad).scores("the dog")


@pytest.mark.parametrize("arg,needle", [("temperature=nan", "temperature=nan must be a finite number"),
                                        ("seed=12345678901234567890123", "must be in [0, 2**63)"),
                                        ("temperature=inf", "temperature=inf must be a finite number")])
def test_sample_settings_that_are_not_numbers_it_can_use_are_one_line(arg, needle, trained, capsys):
    from attnexp.cli import main

    assert main(["sample", f"ckpt={trained[1]}", "prompt=the dog", arg]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err, err


def test_sample_says_which_prompt_words_became_unknown_and_show_needs_a_text(trained, capsys):
    from attnexp import api
    from attnexp.cli import main
    from attnexp.config import ConfigError

    assert main(["sample", f"ckpt={trained[1]}", "prompt=the zyzzyva", "max_new_tokens=3"]) == 0
    assert "1 word(s) of the prompt are not in the vocabulary and became [UNK]: zyzzyva" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="give at least one text"):
        api.load(trained[1]).show()


@pytest.mark.parametrize("sig,code", [("SIGTERM", 143), ("SIGINT", 130)])
def test_eval_stopped_by_a_signal_says_so_and_leaves_no_half_folder(sig, code, trained, tmp_path, capsys, monkeypatch):
    """Before: under SIGTERM `eval` exited 143 with no line and left an empty output folder; under
    SIGINT, a KeyboardInterrupt traceback. The signal comes while the maps are drawn."""
    import os
    import signal

    from attnexp.cli import main
    from attnexp.training import evaluate

    drawn = evaluate.draw_split_maps

    def stopped_while_drawing(model, dm, split, folder):
        drawn(model, dm, split, folder)
        os.kill(os.getpid(), getattr(signal, sig))

    monkeypatch.setattr(evaluate, "draw_split_maps", stopped_while_drawing)
    out = tmp_path / "eval"
    assert main(["eval", f"ckpt={trained[1]}", "split=val", f"out={out}"]) == code
    err = capsys.readouterr().err.strip()
    assert err == f"attnexp eval: stopped by {sig}; nothing was written (run the same command again)", err
    assert not out.exists()


def test_mlflows_local_store_is_checked_before_the_run(tmp_path):
    """Before: paths.log_dir with a '?' wrote MLflow's store to a file named after the part before it
    (the URI is parsed as a URL); a corrupt mlflow.db gave Hydra's 4-line error without its name."""
    pytest.importorskip("mlflow", reason="needs MLflow (pip install -e '.[mlflow]')")
    from attnexp.config import ConfigError

    odd = tmp_path / "runs?x#y"
    with pytest.raises(ConfigError, match=r"paths.log_dir holds '#' and '\?', which MLflow's SQLite store URI"):
        run_of(["logger=mlflow", f"paths.log_dir='{odd}'"], tmp_path / "run")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "mlflow.db").write_bytes(b"SQLite format 3\x00" + b"\x00" * 200)
    with pytest.raises(ConfigError, match=r"MLflow's store .*mlflow.db is not a whole SQLite database"):
        run_of(["logger=mlflow", f"paths.log_dir={logs}"], tmp_path / "run")
    # issue 51/52: the one SQLite check both stores take: an Optuna study where MLflow's store goes is refused
    # (MLflow would have added its tables to it), and left byte-identical
    import optuna

    other = tmp_path / "other"
    other.mkdir()
    optuna.create_study(study_name="s", storage=f"sqlite:///{other / 'mlflow.db'}")
    before = (other / "mlflow.db").read_bytes()
    with pytest.raises(ConfigError, match=r"MLflow's store .*mlflow.db is another tool's database \(it holds .*studies"):
        run_of(["logger=mlflow", f"paths.log_dir={other}"], tmp_path / "run")
    assert (other / "mlflow.db").read_bytes() == before


def test_an_override_the_grammar_cannot_read_is_named(capsys):
    """Before: a value holding '?' unquoted was refused as "cannot read the override ''" (Hydra's lexer
    error names no override)."""
    from attnexp.cli import main

    assert main(["train", "trainer.max_epochs=2", "paths.log_dir=/tmp/runs#x", "--cfg", "job"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("attnexp: config error: cannot read the override 'paths.log_dir=/tmp/runs#x' (") and \
        "key='a value'" in err and "\n" not in err, err


@pytest.mark.parametrize("args,needle", [
    (["-m", "hparams_search=optuna", "hydra.sweeper.sampler.n_startup_trials=5"],
     # issue 50: before, "did you mean hydra.sweeper.n_startup_trials?", which is the pruner's setting
     "hydra.sweeper.sampler.n_startup_trials is not a key of attnexp's Optuna sweeper (attnexp's sampler takes only "
     "hydra.sweeper.sampler=tpe|random and hydra.sweeper.seed; hydra.sweeper.n_startup_trials is the median "
     "pruner's); it takes hydra.sweeper.KEY for KEY in: study_name, storage,"),
    (["-m", "hparams_search=optuna", "hydra.sweeper.pruner.n_startup_trials=5"],
     "hydra.sweeper.pruner.n_startup_trials is not a key of attnexp's Optuna sweeper (did you mean "
     "hydra.sweeper.n_startup_trials?)"),
    (["paths.output_dir=/tmp/elsewhere"], "paths.output_dir is the folder attnexp gives each run"),
], ids=["lht-sampler-key", "lht-pruner-key", "output-dir"])
def test_lightning_hydra_template_habits_get_attnexps_key(args, needle, capsys):
    """Before: LHT's sampler key said "Cannot convert 'dict' to string", and paths.output_dir=DIR was
    taken silently and split the run (summary.json there, train.log and .hydra/ in outputs/)."""
    from attnexp.cli import main

    assert main(["train", *args, "--cfg", "job"]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err, err


def test_eval_takes_lhts_key_too_and_the_split_train_would_score(trained, tmp_path, capsys):
    """Before: `eval ckpt_path=` printed only a usage line, then a line naming ckpt=; eval's default
    split=test refused the toy data (no test split) that `train test=true` rescores on validation.
    Issue 68 item 3: ckpt_path, lightning-hydra-template's eval.py key, is taken as ckpt (conf/eval.yaml)."""
    from attnexp.cli import main

    assert main(["eval", f"ckpt_path={trained[1]}", f"out={tmp_path / 'lht'}"]) == 0
    assert json.loads((tmp_path / "lht" / "summary.json").read_text())["split"] == "val"
    assert main(["eval", f"ckpt={trained[1]}", f"out={tmp_path / 'e'}"]) == 0
    assert json.loads((tmp_path / "e" / "summary.json").read_text())["split"] == "val"
    assert main(["eval", f"ckpt={trained[1]}", "ckpt_path=other.ckpt"]) == 2
    assert "name two checkpoints" in capsys.readouterr().err


def test_attnexp_load_is_there_from_import_attnexp(trained):
    import attnexp

    assert attnexp.load(trained[1]).attention("the dog runs .")[1].ndim == 4


def test_enforce_tags_refuses_a_run_without_tags_and_ddp_sim_is_lhts_preset(tmp_path):
    """lightning-hydra-template's extras.enforce_tags and trainer=ddp_sim were missing."""
    from attnexp.config import ConfigError

    with pytest.raises(ConfigError, match=r"extras.enforce_tags=true and this run has no tags"):
        run_of(["extras.enforce_tags=true"], tmp_path)
    assert run_of(["extras.enforce_tags=true", "tags=[first]"], tmp_path).tags == ["first"]
    sim = run_of(["trainer=ddp_sim"], tmp_path).trainer
    assert (sim.strategy, sim.accelerator, sim.devices) == ("ddp", "cpu", 2)


def test_lht_path_anchors_root_dir_and_data_dir(tmp_path, monkeypatch):
    """paths.root_dir and paths.data_dir (lightning-hydra-template's anchors) were missing: a data
    path can now be written against them, and PROJECT_ROOT moves the root as LHT's .project-root does."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "corpus.txt").write_text("the dog runs .\nthe cats sleep .\n" * 20)
    monkeypatch.chdir(tmp_path)
    run = run_of(["data.corpus=${paths.data_dir}/corpus.txt"], tmp_path / "run")
    assert run.data.corpus == str(tmp_path / "data" / "corpus.txt")
    monkeypatch.setenv("PROJECT_ROOT", str(tmp_path / "elsewhere"))
    assert run_of([], tmp_path / "run").config["paths"]["data_dir"] == str(tmp_path / "elsewhere" / "data")


def test_maps_dtype_chooses_the_saved_precision(trained, tmp_path, capsys):
    """Snapshots were float16 with no way to ask for more and no word in `attnexp maps --help`."""
    import numpy as np

    from attnexp.cli import main

    for dtype in ("float16", "float32"):
        assert main(["maps", f"ckpt={trained[1]}", "text=the dog runs .", f"out={tmp_path / dtype}", f"dtype={dtype}"]) == 0
        with np.load(tmp_path / dtype / "maps.npz") as z:
            assert z["weights"].dtype == np.dtype(dtype)
    assert main(["maps", f"ckpt={trained[1]}", "text=the dog", f"out={tmp_path / 'x'}", "dtype=float64"]) == 2
    assert "maps.dtype='float64' is not one of: float16, float32" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["maps", "--help"])
    assert "float16 (the default, half the size" in capsys.readouterr().out
