"""The command line as a user meets it: one clear line for a bad override, a sweep that goes on past
a bad job, help and every command, epoch lines instead of bar redraws in a log, and `attnexp maps`
on a trained checkpoint (unknown words said, earlier maps never overwritten)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from attnexp.api import train
from attnexp.cli import main
from helpers.runs import REPO as REPO_ROOT
from helpers.runs import run_of

FAST = ["trainer.enable_progress_bar=false", "data.n_sentences=300", "logger=none"]
QUICK = ["trainer.enable_progress_bar=false", "data.n_sentences=400", "trainer.max_epochs=2", "maps.n_examples=2"]


def run_cli(*args, cwd):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-m", "attnexp", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_maps_command_reports_unknown_words_and_never_overwrites(tmp_path, capsys):
    s = train(run_of([*QUICK, "logger=none", "trainer.max_epochs=1"], tmp_path))
    ckpt = s["checkpoints"]["last"]
    for _ in range(2):
        assert main(["maps", f"ckpt={ckpt}", "text=the zebra sleeps near the quokka ."]) == 0
    err = capsys.readouterr().err
    assert "2 word(s) of 'the zebra sleeps near the quokka .' are not in the vocabulary and became [UNK]: zebra, quokka" in err
    assert sorted(p.name for p in (tmp_path / "maps").glob("custom_*")) == ["custom_last", "custom_last-2"]


@pytest.mark.slow
def test_a_piped_run_writes_epoch_lines_not_bar_redraws(tmp_path):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    r = subprocess.run([sys.executable, "-m", "attnexp", "train", "trainer.max_epochs=3", "data.n_sentences=600",
                        "logger=none", f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stdout.splitlines() if "[attnexp][INFO] - epoch " in x]
    said = [x.split(" - ")[1].split(" · ")[0] for x in lines]
    assert said == ["epoch 0 (1 of 3)", "epoch 1 (2 of 3)", "epoch 2 (3 of 3)"], r.stdout
    assert "\r" not in r.stdout and len(r.stdout) + len(r.stderr) < 8000, len(r.stdout)
    assert "attnexp: run completed" in r.stdout


@pytest.mark.parametrize("override,needle", [
    pytest.param("attention=nope", "attention=nope is not an option of attention; choose one of", marks=pytest.mark.slow),
    ("model.n_heads=5", "model.d_model=64 is not divisible by model.n_heads=5"),  # the default run's one CLI call
    pytest.param("optim.lr=-1", "optim.lr=-1.0 must be positive", marks=pytest.mark.slow),
    pytest.param("data.corpus=missing.txt", "data.corpus='missing.txt': no such file", marks=pytest.mark.slow),
])
def test_cli_bad_override_is_one_clear_line(override, needle, tmp_path):
    r = run_cli("train", override, "logger=none", cwd=tmp_path)
    assert r.returncode != 0
    assert needle in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.slow
def test_cli_sweep_keeps_going_past_a_bad_job(tmp_path):
    r = run_cli("train", "-m", "model.n_heads=4,5", "trainer.fast_dev_run=true", "logger=none",
                "data.n_sentences=200", "trainer.enable_progress_bar=false", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert "1 run(s) of the sweep failed" in r.stderr
    status = sorted(json.loads(p.read_text())["status"] for p in tmp_path.glob("multirun/*/*/*/summary.json"))
    assert status == ["completed", "config_error"]
    done = [json.loads(p.read_text()) for p in tmp_path.glob("multirun/*/*/*/summary.json")]
    assert [0 < s["startup_s"] < 120 for s in done if s["status"] == "completed"] == [True]  # `python -m attnexp` to training
    # `compare` with no folder reads the newest sweep: one row a job, the swept key as a column
    r = run_cli("compare", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    head, _, *rows = r.stdout.strip().splitlines()
    assert [c.strip() for c in head.strip("|").split("|")][:3] == ["run", "model.n_heads", "status"]
    assert len(rows) == 2 and any("config_error" in x and "not divisible" in x for x in rows), r.stdout


@pytest.mark.slow
def test_cli_help_and_commands(tmp_path):
    assert "train" in run_cli("--help", cwd=tmp_path).stdout
    h = run_cli("train", "--help", cwd=tmp_path).stdout
    for group in ("attention:", "model:", "data:", "task:", "trainer:", "logger:", "experiment:"):
        assert group in h
    # issue 68 item 7: the groups the README says --help lists include hydra/launcher's and local
    from helpers.runs import options

    launcher = next(line for line in h.splitlines() if line.startswith("hydra/launcher:"))
    assert all(o in launcher for o in options("hydra/launcher")) and "\nlocal: " in h
    r = run_cli("frobnicate", cwd=tmp_path)
    assert r.returncode == 2 and "unknown command" in r.stderr


@pytest.mark.parametrize("page,start,end", [("README.md", "## Config groups", "Mistakes in overrides"),
                                             ("docs/configuration.md", "| group |", "Top-level keys")])
def test_the_readme_and_the_docs_name_every_option_of_every_config_group(page, start, end):
    from helpers.runs import REPO, options

    text = (REPO / page).read_text()
    section = text[text.index(start):text.index(end)]
    rows = {line.split("|")[1].strip(" `"): line.split("|")[2] for line in section.splitlines() if line.startswith("| `")}
    for group in ("attention", "model", "data", "task", "trainer", "logger", "experiment", "hparams_search", "debug",
                  "callbacks", "paths"):
        missing = [o for o in options(group) if f"`{o}`" not in rows[group]]
        assert not missing, f"{page}'s config-group table lacks {group}: {missing}"


@pytest.mark.slow
def test_two_devices_with_the_default_trainer_run_data_parallel(tmp_path):
    r = run_cli("train", "trainer.accelerator=cpu", "trainer.devices=2", *FAST, "trainer.max_epochs=1",
                f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert s["status"] == "completed" and s["steps"] > 0


# -- after the first run: eval, sample, and what lightning-hydra-template / nanoGPT users type ---------

@pytest.fixture(scope="module")
def causal_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("causal")
    s = train(run_of(["attention=causal", "trainer.max_epochs=2", "data.n_sentences=600", "logger=none",
                      "trainer.enable_progress_bar=false", "maps.n_examples=2"], d / "run"))
    return d / "run", s


def test_eval_reproduces_the_runs_own_best_metrics_on_the_same_split(causal_run, capsys):
    run, s = causal_run
    best = s["metrics"]["best"]["checkpoint"]
    assert main(["eval", f"ckpt={best}", "split=val"]) == 0
    out = capsys.readouterr().out
    folder = run / "eval" / f"{Path(best).stem}_val"
    e = json.loads((folder / "summary.json").read_text())
    assert e["kind"] == "eval" and e["status"] == "completed" and e["split"] == "val"
    # the run's test stage scored the best checkpoint on val (toy data has no test split): best_val/*
    assert {k.split("/")[1]: v for k, v in e["metrics"]["test"].items()} == \
        {k.split("/")[1]: v for k, v in s["metrics"]["test"].items()}
    assert (folder / "viewer.html").is_file() and (folder / "maps_ex0.png").is_file()
    assert f"-> {folder}/" in out
    from attnexp.cli.compare import compare_cli

    assert compare_cli([str(run)]) == 0  # the eval record is not listed as a run of its own
    assert capsys.readouterr().out.count("completed") == 1


def test_eval_runs_on_the_device_training_would_use(causal_run, monkeypatch):
    """`attnexp eval` on a GPU machine scored 7,532 test posts on its CPU (accelerator="cpu"): it
    takes Lightning's choice as `train` does (the real Trainer, its arguments recorded)."""
    import lightning

    made, real = [], lightning.Trainer

    def recording(*args, **kwargs):
        made.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(lightning, "Trainer", recording)
    run, s = causal_run
    assert main(["eval", f"ckpt={s['metrics']['best']['checkpoint']}", "split=val", f"out={run / 'eval_device'}"]) == 0
    assert [k.get("accelerator") for k in made] == ["auto"]


@pytest.mark.parametrize("args,needle", [
    (["split=test"], "split=test: data=toy has no test split (it has train, val); give split=val"),
    (["split=val", "data.n_sentences=100"], "these data settings give another tokenizer than the one it was trained with"),
    (["split=val", "model.d_model=8"], "eval takes data.KEY=VALUE overrides only"),
    (["split=nope"], "split='nope' is not one of: test, val, train"),
], ids=["no-test-split", "other-vocabulary", "not-data", "bad-split"])
def test_eval_refuses_what_does_not_fit_the_checkpoint_in_one_line(causal_run, args, needle, capsys):
    assert main(["eval", f"ckpt={causal_run[1]['checkpoints']['last']}", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err, err


def test_sample_continues_a_prompt_reproducibly_and_refuses_models_without_a_next_token(causal_run, tmp_path, capsys):
    from attnexp import api

    ckpt = causal_run[1]["checkpoints"]["last"]
    a = api.sample(ckpt, "the dog", max_new_tokens=8, num_samples=2, seed=3)
    assert a == api.sample(ckpt, "the dog", max_new_tokens=8, num_samples=2, seed=3)
    assert len(a) == 2 and all(t.startswith("the dog ") and len(t.split()) > 2 for t in a)
    greedy = api.sample(ckpt, "the dog", max_new_tokens=5, temperature=0, num_samples=2)
    assert greedy[0] == greedy[1]
    assert main(["sample", f"ckpt={ckpt}", "prompt=the cat", "max_new_tokens=5", "seed=1"]) == 0
    assert capsys.readouterr().out.startswith("the cat ")
    bi = train(run_of(["attention=bidirectional", "trainer.max_epochs=1", "data.n_sentences=100", "logger=none",
                       "maps.enabled=false", "trainer.enable_progress_bar=false", "test=false"], tmp_path / "bi"))
    assert main(["sample", f"ckpt={bi['checkpoints']['last']}", "prompt=the"]) == 2
    assert "is a bidirectional model (masked tokens)" in capsys.readouterr().err


def test_sample_never_draws_a_token_a_causal_model_is_not_trained_to_predict(causal_run, monkeypatch):
    """[PAD] (no loss there) and [BOS] (never a next token) have finite logits; drawn, they were dropped
    from the printed text while the model went on from them. At temperature 1e6 (every token alike),
    60 samples of up to 100 tokens drew [PAD] before (among 3,878 tokens)."""
    from attnexp import api
    from attnexp.data.encoder import TextEncoder
    from attnexp.data.vocab import BOS, MASK, PAD

    drawn = []
    monkeypatch.setattr(TextEncoder, "decode_text", lambda self, ids: drawn.append(list(ids)) or "")
    api.sample(causal_run[1]["checkpoints"]["last"], "the dog", max_new_tokens=100, temperature=1e6, num_samples=60)
    new = [i for ids in drawn for i in ids[3:]]  # after the prompt: [BOS] the dog
    assert len(new) > 1000 and PAD not in new and BOS not in new
    assert MASK not in new  # issue 68 item 7: a masked LM's input is no causal LM's next token


def test_what_other_tools_call_a_setting_names_attnexps(capsys):
    """Before: model.optimizer.lr suggested model.compile, and ckpt_path said only "not a config key"."""
    for given, said in (("model.optimizer.lr=0.1", "model.optimizer.lr is not a config key; attnexp's is optim.lr"),
                        ("ckpt_path=x.ckpt", "ckpt_path is not a config key; attnexp's is resume=PATH"),
                        ("model.n_head=4", "did you mean model.n_heads?")):
        assert main(["train", given]) == 2
        assert said in capsys.readouterr().err


def test_the_callbacks_group_is_lightning_hydra_templates_spelling_of_attnexps_settings(capsys):
    """`callbacks=default` failed with "Input cfg is not an OmegaConf config object (str)": callbacks
    was a plain key. It is a group now (default, none: attnexp's own callbacks, which checkpoint.* and
    maps.* set); LHT's callback settings name attnexp's, and a callback of one's own is still added by
    +callbacks.NAME._target_."""
    from attnexp.api import compose, load_run

    for choice in ("default", "none"):
        run = load_run(compose([f"callbacks={choice}", "+callbacks.lr._target_=lightning.pytorch.callbacks.LearningRateMonitor"]))
        assert list(run.callbacks) == ["lr"]
    for given, said in (("callbacks.early_stopping.patience=3", "attnexp's is checkpoint.patience"),
                        ("callbacks.model_checkpoint.monitor=val/acc", "attnexp's is checkpoint.monitor")):
        assert main(["train", given]) == 2
        err = capsys.readouterr().err
        assert said in err and len(err.strip().splitlines()) == 1, err


def test_a_run_says_nothing_of_absent_accelerators_unless_asked(tmp_path):
    """Every run printed Lightning's "GPU available: False", "TPU available: False" and "Loading
    `train_dataloader` to estimate ..." (the after-the-first-run issue, item 5); extras.ignore_warnings
    (on by default) drops them, and =false shows them again."""
    quiet = run_cli("train", *FAST, "trainer.max_epochs=1", f"hydra.run.dir={tmp_path / 'a'}", cwd=tmp_path)
    loud = run_cli("train", *FAST, "trainer.max_epochs=1", "extras.ignore_warnings=false", f"hydra.run.dir={tmp_path / 'b'}",
                   cwd=tmp_path)
    assert quiet.returncode == loud.returncode == 0, quiet.stderr[-2000:] + loud.stderr[-2000:]
    for noise in ("GPU available: False", "TPU available: False", "to estimate number of stepping batches"):
        assert noise not in quiet.stdout + quiet.stderr and noise in loud.stdout + loud.stderr, noise


def test_the_paths_group_places_runs_sweeps_and_the_cache(tmp_path, monkeypatch):
    """lightning-hydra-template's paths group (the after-the-first-run issue, item 5): log_dir for single
    runs, sweep_dir for sweeps, cache_dir for the tokenized data; output_dir stays the run's own."""
    from attnexp.api import compose, load_run

    monkeypatch.chdir(tmp_path)
    fast = ["trainer.fast_dev_run=true", "logger=none", "maps.enabled=false"]
    assert main(["train", "paths.log_dir=logs", *fast]) == 0
    assert main(["train", "-m", "paths.sweep_dir=sweeps", "seed=0,1", *fast]) == 0
    assert len(list((tmp_path / "logs").glob("*/*/summary.json"))) == 1
    assert len(list((tmp_path / "sweeps").glob("*/*/*/summary.json"))) == 2
    run = load_run(compose(["data=newsgroups", "task=classify", f"paths.cache_dir={tmp_path / 'cache'}"]))
    assert run.data.cache_dir == str(tmp_path / "cache")


def test_run_folders_say_what_ran(tmp_path, monkeypatch):
    """Six tour commands gave six HH-MM-SS_causal folders: now <time>_<experiment, or data-task>_<attention>."""
    monkeypatch.chdir(tmp_path)
    fast = ["trainer.fast_dev_run=true", "logger=none", "maps.enabled=false"]
    for given in ([], ["experiment=copy"], ["attention=alibi", "task=classify"]):
        assert main(["train", *given, *fast]) == 0
    names = sorted(p.name.split("_", 1)[1] for p in (tmp_path / "outputs").glob("*/*"))
    assert names == ["copy_causal", "toy-classify_alibi", "toy-lm_causal"], names


@pytest.mark.slow
def test_the_quickstart_notebook_runs_on_a_real_kernel_and_its_maps_are_the_runs(tmp_path):
    """examples/quickstart.ipynb, executed top to bottom by nbclient on a real ipykernel: train, load,
    attention, show, head importance. The maps `attention(text)` returns equal the ones the run saved
    for the same checkpoint and text (its last snapshot, fp16)."""
    nbclient = pytest.importorskip("nbclient")
    import nbformat
    import numpy as np

    nb = nbformat.read(REPO_ROOT / "examples" / "quickstart.ipynb", as_version=4)
    out = tmp_path / "quick"
    nb.cells.insert(0, nbformat.v4.new_code_cell(f"import os; os.environ['ATTNEXP_QUICKSTART_OUT'] = {str(out)!r}"))
    nb.cells.append(nbformat.v4.new_code_cell("import numpy as np; np.save(OUT / 'attention.npy', w); "
                                              "print(summary['status'], type(m.show(TEXT)._repr_html_()).__name__)"))
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    shown = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if "text/html" in o.get("data", {})]
    assert shown and "<iframe srcdoc=" in shown[0]["data"]["text/html"]
    assert "completed str" in nb.cells[-1]["outputs"][0]["text"]
    from attnexp.maps import snapshot

    with snapshot.opened(snapshot.latest(out / "maps")) as z:
        saved = z["weights"][:, 0].astype(np.float32)  # (L, H, T, T) of the one probe text
    ours = np.load(out / "attention.npy")
    assert ours.shape == saved.shape and np.abs(ours - saved).max() < 2e-3


def test_variants_fit_100_columns(capsys):
    assert main(["variants"]) == 0
    wide = [x for x in capsys.readouterr().out.splitlines() if len(x) > 100]
    assert not wide, wide  # before: 23 lines over 100


def test_what_lightning_hydra_template_users_type_for_none_and_an_unseeded_run(tmp_path, capsys):
    """logger=null (Hydra refused a null group choice) and seed=null ("must be an integer" before):
    an unseeded run draws a seed and records it, so it can be repeated. The run folder is said as
    training starts, not only at the end."""
    assert main(["train", "logger=null", "seed=null", "trainer.fast_dev_run=true", "data.n_sentences=100",
                 f"hydra.run.dir={tmp_path / 'run'}"]) == 0
    out = capsys.readouterr().out
    assert out.index(f"attnexp: training in {tmp_path / 'run'}") < out.index("attnexp: run completed")
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert isinstance(s["seed"], int) and not (tmp_path / "run" / "tensorboard").exists()


def test_tags_reach_the_summary_the_loggers_and_compare(tmp_path, monkeypatch, capsys):
    """lightning-hydra-template's tags=[...]: before, "tags is not a config key"."""
    from helpers import wandb_log

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    common = ["trainer.max_epochs=1", "data.n_sentences=100", "maps.enabled=false", "test=false"]
    assert main(["train", *common, "tags=[baseline,first]", "logger=wandb", f"hydra.run.dir={tmp_path / 'runs' / 'a'}"]) == 0
    assert main(["train", *common, "logger=none", f"hydra.run.dir={tmp_path / 'runs' / 'b'}"]) == 0
    assert json.loads((tmp_path / "runs" / "a" / "summary.json").read_text())["tags"] == ["baseline", "first"]
    (log,) = (tmp_path / "runs" / "a").rglob("run-*.wandb")
    assert {"baseline", "first"} <= set(wandb_log.summary(log)["tags"])
    capsys.readouterr()
    from attnexp.cli.compare import compare_cli

    assert compare_cli([str(tmp_path / "runs"), "tag=baseline"]) == 0
    out = capsys.readouterr().out
    assert "completed" in out and out.count("completed") == 1  # run b has no tag


def test_eval_of_a_classifier_writes_each_examples_prediction_in_split_order(tmp_path, capsys):
    """Issue 55: a paired test of two models (McNemar's, or a paired bootstrap over posts) needs each
    example's prediction, which no run or eval kept. `attnexp eval` of a classifier now writes
    predictions.json: the label and the prediction of every example of the split, example i at i,
    whatever order the (length-bucketed) batches took; they give the accuracy eval reports."""
    from attnexp.api import compose
    from attnexp.data import build_datamodule
    from attnexp.launch.load import load_run

    overrides = ["data=toy", "task=classify", "data.n_sentences=300", "data.bucket=true", "trainer.max_epochs=1",
                 "logger=none", "maps.enabled=false", "trainer.enable_progress_bar=false", "test=false"]
    s = train(run_of(overrides, tmp_path / "run"))
    assert main(["eval", f"ckpt={s['checkpoints']['last']}", "split=val", f"out={tmp_path / 'eval'}"]) == 0
    e = json.loads((tmp_path / "eval" / "summary.json").read_text())
    kept = json.loads((tmp_path / "eval" / e["predictions"]).read_text())
    run = load_run(compose(overrides, tmp_path / "again"))
    dm = build_datamodule(run.data, run.task, causal=run.attention.causal, seed=run.seed)
    dm.setup("fit")
    table = dm.table("val", per_epoch=False)
    assert kept["split"] == "val" and kept["label"] == [int(x) for x in table.labels.flatten().tolist()]
    right = sum(p == y for p, y in zip(kept["pred"], kept["label"])) / len(kept["label"])
    assert right == pytest.approx(e["metrics"]["test"]["val/acc"], abs=1e-6)


def test_every_read_of_a_runs_test_split_is_noted_in_its_folder(tmp_path, capsys):
    """Issue 55 item 5: "which calls scored test" could not be checked from anything a run kept. Each
    read of a run's test split is a line of <run>/test_reads.jsonl: train's test=true, then each
    `attnexp eval split=test` of one of its checkpoints (a split=val eval reads no test); the eval's
    record names the run. A planted ledger's junk lines are skipped, an oversized one is not read."""
    from attnexp.config import layout
    from attnexp.results import test_reads

    run = tmp_path / "run"
    s = train(run_of(["data=synthetic", "data.kind=copy", "data.n_train=64", "data.n_val=16", "data.n_test=16",
                      "trainer.max_epochs=1", "logger=none", "maps.enabled=false", "trainer.enable_progress_bar=false"], run))
    assert [r["by"] for r in test_reads.read(run)] == ["train test=true"]
    assert test_reads.read(run)[0]["checkpoint"].startswith("best-epoch")
    assert main(["eval", f"ckpt={s['checkpoints']['last']}", "split=val", f"out={tmp_path / 'val'}"]) == 0
    assert main(["eval", f"ckpt={s['checkpoints']['last']}", "split=test", f"out={tmp_path / 'test'}"]) == 0
    reads = test_reads.read(run)
    assert [(r["by"], r["checkpoint"]) for r in reads] == [("train test=true", reads[0]["checkpoint"]),
                                                           ("eval split=test", "last.ckpt")]
    assert json.loads((tmp_path / "test" / "summary.json").read_text())["test_read_noted_in"] == str(run.resolve())
    assert "test_read_noted_in" not in json.loads((tmp_path / "val" / "summary.json").read_text())
    with open(run / layout.TEST_READS, "a") as f:
        f.write('not json\n[1, 2]\n{"by": 3}\n{"by": "planted", "extra": "x"}\n')
    assert [r["by"] for r in test_reads.read(run)] == ["train test=true", "eval split=test", "planted"]
    (run / layout.TEST_READS).write_text('{"by": "x"}\n' * (test_reads.MAX_BYTES // 10))
    assert test_reads.read(run) == []
