"""A run survives any stop, resumes to the same run, never trains on NaN silently, and loads
checkpoints from strangers as data. (The bad-input table is tests/test_bad_input.py; the command line
stopped from outside, its exit codes and resume line: tests/e2e/test_cli_stops.py.)"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch

from attnexp.api import train
from attnexp.cli import main
from attnexp.config import ConfigError
from attnexp.model import checkpoints
from attnexp.training.checkpointing import AtomicCheckpointIO
from helpers.runs import REPO, run_of, strict_json

# masked-token LM with dropout: both random masks and dropout must resume exactly
QUICK = ["attention=bidirectional", "model.dropout=0.1", "data.n_sentences=400", "trainer.max_epochs=3",
         "logger=none", "test=false", "trainer.enable_progress_bar=false", "maps.n_examples=2"]
STEPS_PER_EPOCH = 6  # 360 training sentences in batches of 64


class SignalAt(L.Callback):
    """Sends a signal to this very process after optimizer step `step`, as a cluster would."""

    def __init__(self, step: int, sig=signal.SIGTERM):
        self.step, self.sig = step, sig

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == self.step:
            os.kill(os.getpid(), self.sig)


def weights(path: Path) -> dict:
    return torch.load(path, weights_only=True, map_location="cpu")["state_dict"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("whole")
    return train(run_of(QUICK, out)), out


@pytest.mark.parametrize("stop_at", [STEPS_PER_EPOCH, STEPS_PER_EPOCH + 2], ids=["epoch-boundary", "mid-epoch"])
def test_resumed_run_equals_the_uninterrupted_one(uninterrupted, stop_at, tmp_path):
    whole, whole_dir = uninterrupted
    cut = train(run_of(QUICK, tmp_path), callbacks=[SignalAt(stop_at)])
    assert cut["status"] == "interrupted" and cut["signal"] == "SIGTERM" and cut["steps"] == stop_at
    assert Path(cut["resume_checkpoint"]).name == "interrupted.ckpt"
    assert strict_json(tmp_path / "summary.json")["status"] == "interrupted"
    assert (tmp_path / "maps" / "viewer.html").is_file() and (tmp_path / "maps" / "evolution_ex0.gif").is_file()

    done = train(run_of([*QUICK, "resume=auto"], tmp_path))
    assert done["status"] == "completed" and done["resumed_from"] == [cut["resume_checkpoint"]]
    # same weights to the bit, same validation curve, same counts: the run is the uninterrupted one
    a, b = weights(whole_dir / "checkpoints/last.ckpt"), weights(tmp_path / "checkpoints/last.ckpt")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert done["metrics"]["history"] == whole["metrics"]["history"]
    assert (done["steps"], done["epochs"], done["train_tokens"]) == (whole["steps"], whole["epochs"], whole["train_tokens"])
    # the maps of the first part are kept: the viewer and the GIF cover all three epochs
    assert sorted(p.name for p in (tmp_path / "maps").glob("epoch*.npz")) == [f"epoch00{i}.npz" for i in range(3)]
    viewer = (tmp_path / "maps" / "viewer.html").read_text()
    assert '"epochs": [-1, 0, 1, 2]' in viewer  # -1: the start snapshot, before training
    from PIL import Image

    assert Image.open(tmp_path / "maps" / "evolution_ex0.gif").n_frames == 4  # the start, then 3 epochs
    # the heads timeline goes on where the checkpoint was: the uninterrupted run's readings, each once
    import numpy as np

    from attnexp.heads import timeline as tl

    t_whole, t_done = tl.read(whole_dir / "maps" / tl.FILE), tl.read(tmp_path / "maps" / tl.FILE)
    assert t_done.steps.tolist() == t_whole.steps.tolist() and len(t_whole.readings) > 10
    for name in set(t_whole.names()) - {"drift"}:  # drift: from the start maps, which a resume reads as float16
        np.testing.assert_allclose(t_done.curve(name), t_whole.curve(name), atol=1e-4, err_msg=name)


def test_same_seed_same_config_same_metrics(uninterrupted, tmp_path):
    whole, whole_dir = uninterrupted
    again = train(run_of(QUICK, tmp_path))
    assert again["metrics"]["history"] == whole["metrics"]["history"]
    a, b = weights(whole_dir / "checkpoints/last.ckpt"), weights(tmp_path / "checkpoints/last.ckpt")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_sigint_in_process_is_an_interrupt_with_a_checkpoint(tmp_path):
    s = train(run_of(QUICK, tmp_path), callbacks=[SignalAt(3, signal.SIGINT)])
    assert s["status"] == "interrupted" and s["signal"] == "SIGINT" and s["steps"] == 3
    assert checkpoints.newest(tmp_path) == tmp_path / "checkpoints" / "interrupted.ckpt"
    saved = checkpoints.load(tmp_path / "checkpoints" / "interrupted.ckpt")  # read as data (weights_only=True)
    assert saved["global_step"] == 3
    assert saved["optimizer_states"] and saved["lr_schedulers"], "a whole checkpoint: resume= continues from it"


def test_a_cluster_signal_stops_cleanly_then_runs_the_handler_that_was_there(tmp_path):
    """submitit requeues a SLURM job from its SIGUSR2 handler: attnexp stops after the step, writes its
    checkpoint and summary, then hands the signal to that handler."""
    called = []
    previous = signal.signal(signal.SIGUSR2, lambda signum, frame: called.append(signum))
    try:
        s = train(run_of(QUICK, tmp_path), callbacks=[SignalAt(4, signal.SIGUSR2)])
    finally:
        signal.signal(signal.SIGUSR2, previous)
    assert s["status"] == "interrupted" and s["signal"] == "SIGUSR2" and s["steps"] == 4
    assert (tmp_path / "checkpoints" / "interrupted.ckpt").is_file() and called == [signal.SIGUSR2]


def test_resume_auto_without_a_checkpoint_starts_afresh(tmp_path):
    s = train(run_of([*QUICK, "trainer.max_epochs=1", "resume=auto"], tmp_path))
    assert s["status"] == "completed" and s["resumed_from"] == [] and s["steps"] == STEPS_PER_EPOCH


def test_periodic_checkpoints_keep_the_latest(tmp_path):
    s = train(run_of([*QUICK, "trainer.max_epochs=1", "checkpoint.every_n_steps=2", "maps.enabled=false"], tmp_path))
    steps = sorted(p.name for p in (tmp_path / "checkpoints").glob("step-*.ckpt"))
    # steps 2 and 4; not 6, the epoch's last batch, whose checkpoint would come before its validation
    assert steps == ["step-0000004.ckpt"] and s["status"] == "completed"


def test_a_kill_during_a_save_leaves_the_previous_checkpoint_whole(tmp_path, monkeypatch):
    path = tmp_path / "last.ckpt"
    io = AtomicCheckpointIO()
    io.save_checkpoint({"state_dict": {"w": torch.ones(3)}, "hyper_parameters": {}}, path)
    before = path.read_bytes()

    def dies_halfway(obj, f, *a, **kw):
        f.write(b"PK\x03\x04 half a zip")  # what a kill leaves behind mid-write
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", dies_halfway)
    with pytest.raises(KeyboardInterrupt):
        io.save_checkpoint({"state_dict": {"w": torch.zeros(3)}, "hyper_parameters": {}}, path)
    assert path.read_bytes() == before and list(tmp_path.iterdir()) == [path]
    assert torch.equal(checkpoints.load(path)["state_dict"]["w"], torch.ones(3))


def test_divergence_stops_the_run_and_keeps_no_nan_checkpoint(tmp_path):
    s = train(run_of([*QUICK, "optim.lr=1e4", "maps.enabled=false"], tmp_path))
    assert s["status"] == "diverged" and "stopped being a number at step" in s["error"]
    assert s["metrics"]["best"] is None or np.isfinite(s["metrics"]["best"]["value"])
    strict_json(tmp_path / "summary.json")
    for p in (tmp_path / "checkpoints").glob("*.ckpt"):
        assert all(torch.isfinite(t).all() for t in weights(p).values() if t.is_floating_point()), p


def test_skip_mode_skips_a_bad_batch_and_goes_on(tmp_path, monkeypatch):
    import attnexp.training.module as lit

    calls = {"n": 0}
    real = lit.lm_loss

    def sometimes_nan(logits, labels):
        calls["n"] += 1
        loss = real(logits, labels)
        return loss * float("nan") if calls["n"] == 3 else loss

    monkeypatch.setattr(lit, "lm_loss", sometimes_nan)
    s = train(run_of([*QUICK, "trainer.max_epochs=1", "optim.nonfinite=skip", "maps.enabled=false",
                      "trainer.num_sanity_val_steps=0"], tmp_path))
    assert s["status"] == "completed" and s["skipped_batches"] == 1 and s["metrics"]["history"]


def test_skip_mode_gives_up_on_a_run_that_keeps_diverging(tmp_path):
    s = train(run_of([*QUICK, "optim.lr=1e4", "optim.nonfinite=skip", "maps.enabled=false", "data.n_sentences=1200"],
                     tmp_path))  # 17 batches an epoch: more than 10 bad ones in a row before the first validation
    assert s["status"] == "diverged" and "skipping them did not help" in s["error"], s["error"]


class Boom(L.Callback):
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == 2:
            raise RuntimeError("boom")


def test_a_failure_in_training_writes_its_summary_and_a_checkpoint(tmp_path):
    with pytest.raises(RuntimeError, match="boom"):
        train(run_of([*QUICK, "maps.enabled=false"], tmp_path), callbacks=[Boom()])
    s = strict_json(tmp_path / "summary.json")
    assert s["status"] == "failed" and s["error"] == "RuntimeError: boom" and s["steps"] == 2
    assert (tmp_path / "checkpoints" / "on_exception.ckpt").is_file()


def test_a_failure_in_data_setup_writes_its_summary(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "train.jsonl").write_text('{"text": "a post", "label": 1}\n{"text": "broken", "label": \n')
    (folder / "test.jsonl").write_text('{"text": "a post", "label": 1}\n')
    run = run_of(["experiment=newsgroups", "data.source=local", f"data.path={folder}",
                  f"data.cache_dir={tmp_path / 'cache'}", "logger=none"], tmp_path / "run")
    with pytest.raises(ConfigError, match=r"train.jsonl line 2: not valid JSON"):
        train(run)
    s = strict_json(tmp_path / "run" / "summary.json")
    assert s["status"] == "config_error" and "line 2" in s["error"] and not (tmp_path / "run" / "checkpoints").exists()


def test_a_failed_resume_writes_no_checkpoint_of_a_fresh_model(tmp_path, uninterrupted):
    _, whole_dir = uninterrupted
    ckpt = whole_dir / "checkpoints" / "last.ckpt"
    with pytest.raises(ConfigError, match="holds a different model: model.d_model=64 \\(this run: 128\\)"):
        run_of([*QUICK, f"resume={ckpt}", "model.d_model=128"], tmp_path)
    assert not (tmp_path / "checkpoints").exists()


# -- checkpoints from strangers are data ------------------------------------------------------------
class Payload:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def evil_checkpoint(tmp_path: Path) -> tuple[Path, Path]:
    marker, path = tmp_path / "pwned", tmp_path / "evil.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": Payload(marker), "epoch": 0}, path)
    with open(tmp_path / "evil.pkl", "wb") as f:  # a bare pickle too, not only a torch zip
        pickle.dump({"state_dict": Payload(marker)}, f)
    return path, marker


@pytest.mark.parametrize("command", ["maps", "train", "train-pickle", "api"])
def test_a_malicious_checkpoint_runs_no_code(command, tmp_path, capsys):
    path, marker = evil_checkpoint(tmp_path)
    if command == "maps":
        rc = main(["maps", f"ckpt={path}", "text=hello"])
    elif command.startswith("train"):
        p = tmp_path / "evil.pkl" if command == "train-pickle" else path
        rc = main(["train", f"resume={p}", "logger=none"])
    else:
        with pytest.raises(ConfigError, match="was refused: it asks to call posix.system"):
            checkpoints.load(path)
        rc = 2
    assert rc == 2 and not marker.exists(), "the checkpoint's payload ran"
    err = capsys.readouterr().err.strip()
    if command != "api":  # a torch zip with a payload is refused; a bare pickle is not even read as one
        assert len(err.splitlines()) == 1 and ("was refused" in err or "not a readable checkpoint" in err), err
        assert command == "train-pickle" or "was refused: it asks to call posix.system" in err, err


def test_secrets_in_the_environment_never_land_in_the_run_dir(tmp_path, monkeypatch):
    secrets = {"WANDB_API_KEY": "wandbsecret0123456789abcdef", "HF_TOKEN": "hf_secrettokenvalue42",
               "AWS_SECRET_ACCESS_KEY": "awsSECRETkeyVALUE9876", "ATTNEXP_TEST_SECRET": "s3cr3t-value-for-tests"}
    for k, v in secrets.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    train(run_of([*QUICK, "trainer.max_epochs=1", "logger=many", f"paths.log_dir={tmp_path}"], tmp_path))  # MLflow's store too
    leaks = [(p, k) for p in tmp_path.rglob("*") if p.is_file() for k, v in secrets.items() if v.encode() in p.read_bytes()]
    assert not leaks, leaks


def cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), str(REPO)])}
    return subprocess.run([sys.executable, "-m", "attnexp", "train", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow
def test_killed_twice_at_the_worst_moments_the_run_resumes_to_the_uninterrupted_one(tmp_path):
    """SIGKILL as validation starts (a step checkpoint of the epoch's last batch would be taken
    before that validation: resuming from it skipped the validation and later replayed an epoch),
    then right after a step checkpoint; each time resume=auto. The result is the uninterrupted run:
    every tensor, the history, the steps."""
    every = [*QUICK, "threads=1", "checkpoint.every_n_steps=3"]  # step checkpoints at 3, 6, 9, ... (6 steps an epoch)
    whole = train(run_of(every, tmp_path / "whole"))
    run = tmp_path / "run"
    kills = [["+callbacks.kill.at=validation_start", "+callbacks.kill.epoch=1"],
             ["+callbacks.kill.at=step", "+callbacks.kill.step=15"]]
    for n, kill in enumerate(kills):
        r = cli([*every, f"hydra.run.dir={run}", "resume=auto", "+callbacks.kill._target_=helpers.killers.KillAt",
                 f"+callbacks.kill.marker={tmp_path / f'killed{n}'}", *kill], tmp_path)
        assert r.returncode == -signal.SIGKILL, r.stderr[-2000:]
    r = cli([*every, f"hydra.run.dir={run}", "resume=auto"], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    done = strict_json(run / "summary.json")
    assert done["status"] == "completed" and len(done["resumed_from"]) == 2
    assert done["metrics"]["history"] == whole["metrics"]["history"]
    assert (done["steps"], done["epochs"]) == (whole["steps"], whole["epochs"])
    a, b = weights(tmp_path / "whole" / "checkpoints/last.ckpt"), weights(run / "checkpoints/last.ckpt")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_resume_auto_refuses_a_changed_model_as_resume_path_does(tmp_path):
    first = train(run_of([*QUICK, "trainer.max_epochs=1"], tmp_path))
    assert first["status"] == "completed"
    with pytest.raises(ConfigError, match=r"attention.mask=bidirectional \(this run: causal\)"):
        train(run_of([*QUICK, "attention=causal", "trainer.max_epochs=2", "resume=auto"], tmp_path))
    with pytest.raises(ConfigError, match=r"attention.mask=bidirectional \(this run: causal\)"):
        run_of([*QUICK, "attention=causal", f"resume={tmp_path / 'checkpoints' / 'last.ckpt'}"])


def test_an_interrupted_run_logs_no_weights_only_default(tmp_path, caplog):
    """Lightning logged "`weights_only` was not set, defaulting to `False`" for the interrupted.ckpt
    save (its save-side flag); every load passes weights_only=True and no save leaves it unset."""
    import logging

    with caplog.at_level(logging.INFO):
        s = train(run_of([*QUICK, "trainer.max_epochs=2"], tmp_path), callbacks=[SignalAt(3)])
        assert s["status"] == "interrupted"
        assert train(run_of([*QUICK, "trainer.max_epochs=2", "resume=auto"], tmp_path))["status"] == "completed"
    assert not [r for r in caplog.records if "weights_only" in r.getMessage()]
