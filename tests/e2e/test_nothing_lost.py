"""Nothing a run trained is thrown away, and a resume continues the run it names: last.ckpt is the
newest state whatever the monitor says, a resume onto other data is refused, a resume into another
folder keeps the best score, a full or read-only disk is one line."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import lightning as L
import pytest
import torch

from attnexp.api import train
from attnexp.model import checkpoints
from helpers.runs import attnexp, run_of

QUICK = ["attention=bidirectional", "model.dropout=0.1", "data.n_sentences=400", "trainer.max_epochs=3",
         "logger=none", "test=false", "trainer.enable_progress_bar=false", "maps.enabled=false"]
STEPS_PER_EPOCH = 6
# val/loss falls every epoch, so with mode=max the monitor never improves after epoch 0: the weights
# go on changing while no new "best" is saved (the case where Lightning's save_last went stale)
PLATEAU = [*QUICK, "checkpoint.monitor=val/loss", "checkpoint.mode=max"]


def step_of(path) -> int:
    return int(checkpoints.load(path)["global_step"])


def test_last_checkpoint_holds_the_last_step_when_the_monitor_stops_improving(tmp_path):
    """Failed before BestAndLast: last.ckpt stayed at step 6 (epoch 0, the only "best")."""
    s = train(run_of(PLATEAU, tmp_path))
    assert s["status"] == "completed" and s["steps"] == 3 * STEPS_PER_EPOCH
    assert step_of(tmp_path / "checkpoints" / "last.ckpt") == s["steps"]
    assert s["metrics"]["best"]["checkpoint"].endswith("best-epoch00.ckpt")
    assert s["checkpoints"]["last"] == str(tmp_path / "checkpoints" / "last.ckpt")


class LastStepSeen(L.Callback):
    """last.ckpt's step as each training batch starts (after the previous step's checkpoints)."""

    def __init__(self, folder):
        self.folder, self.seen = folder, {}

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        last = self.folder / "checkpoints" / "last.ckpt"
        self.seen[trainer.global_step] = step_of(last) if last.exists() else None


def test_step_checkpoints_refresh_last_too(tmp_path):
    """Failed before: between epochs last.ckpt stayed at the epoch-0 best while step checkpoints went on."""
    seen = LastStepSeen(tmp_path)
    s = train(run_of([*PLATEAU, "trainer.max_epochs=2", "checkpoint.every_n_steps=2"], tmp_path), callbacks=[seen])
    assert s["status"] == "completed"
    # steps 2, 4 (epoch 0), 6 (epoch 0's validation), 8, 10 (epoch 1): never the epoch's last batch
    assert [seen.seen[k] for k in (3, 5, 7, 9, 11)] == [2, 4, 6, 8, 10]
    assert step_of(tmp_path / "checkpoints" / "last.ckpt") == 2 * STEPS_PER_EPOCH


@pytest.mark.slow
def test_a_plateaued_run_killed_two_epochs_later_resumes_at_its_newest_step(tmp_path):
    """The monitor's best is epoch 0; SIGKILL as epoch 3's validation starts. Before the fix
    last.ckpt still held step 6, and resume=auto retrained epochs 1-2."""
    args = [*PLATEAU, "trainer.max_epochs=4", "threads=1"]
    whole = train(run_of(args, tmp_path / "whole"))
    run = tmp_path / "run"
    r = attnexp("train", *args, f"hydra.run.dir={run}", "+callbacks.kill._target_=helpers.killers.KillAt",
                "+callbacks.kill.at=validation_start", "+callbacks.kill.epoch=3",
                f"+callbacks.kill.marker={tmp_path / 'killed'}", cwd=tmp_path)
    assert r.returncode == -signal.SIGKILL, r.stderr[-2000:]
    assert step_of(run / "checkpoints" / "last.ckpt") == 3 * STEPS_PER_EPOCH
    assert checkpoints.newest(run) == run / "checkpoints" / "last.ckpt"
    r = attnexp("train", *args, f"hydra.run.dir={run}", "resume=auto", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    done = json.loads((run / "summary.json").read_text())
    assert done["resumed_from"] == [str(run / "checkpoints" / "last.ckpt")]
    assert done["metrics"]["history"] == whole["metrics"]["history"] and done["steps"] == whole["steps"]
    a = checkpoints.load(tmp_path / "whole" / "checkpoints" / "last.ckpt")["state_dict"]
    b = checkpoints.load(run / "checkpoints" / "last.ckpt")["state_dict"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_resume_into_another_folder_keeps_the_best_score_and_file(tmp_path, recwarn):
    """Lightning forgets best_model_score when the checkpoint's folder differs ("dirpath has
    changed"), so epoch 2 became "best" although its val/loss (monitored with mode=max) was lower."""
    first = train(run_of([*PLATEAU, "trainer.max_epochs=2"], tmp_path / "a"))
    best = first["metrics"]["best"]
    again = train(run_of([*PLATEAU, f"resume={tmp_path / 'a' / 'checkpoints' / 'last.ckpt'}"], tmp_path / "b"))
    assert again["status"] == "completed" and again["steps"] == 3 * STEPS_PER_EPOCH
    assert again["metrics"]["best"]["value"] == best["value"]
    assert again["metrics"]["best"]["checkpoint"] == str(tmp_path / "b" / "checkpoints" / "best-epoch00.ckpt")
    assert step_of(tmp_path / "b" / "checkpoints" / "best-epoch00.ckpt") == STEPS_PER_EPOCH
    assert (tmp_path / "a" / "checkpoints" / "best-epoch00.ckpt").is_file(), "the first run's files are its own"
    assert not [w for w in recwarn if "dirpath has changed" in str(w.message)]


def test_a_resume_onto_other_data_is_refused_and_model_init_fine_tunes_instead(tmp_path):
    """Failed before: a copy-task checkpoint resumed with experiment=reverse (same vocabulary and
    model) restored every state and trained on, since no checkpoint named its data."""
    from attnexp.config import ConfigError

    copy = ["experiment=copy", "data.n_train=256", "data.n_val=64", "trainer.max_epochs=1", "logger=none",
            "trainer.enable_progress_bar=false", "maps.enabled=false", "test=false"]
    first = train(run_of(copy, tmp_path / "copy"))
    assert first["data"]["identity"]["settings"]["kind"] == "copy"
    last = tmp_path / "copy" / "checkpoints" / "last.ckpt"
    assert checkpoints.load(last)["data_identity"] == first["data"]["identity"]
    reverse = [*copy[1:], "experiment=reverse", "trainer.max_epochs=2"]
    with pytest.raises(ConfigError, match=r"was trained on other data: data.kind='copy' \(this run: 'reverse'\).*model.init="):
        train(run_of([*reverse, f"resume={last}"], tmp_path / "reverse"))
    tuned = train(run_of([*reverse, f"model.init={last}"], tmp_path / "tuned"))
    assert tuned["status"] == "completed" and tuned["resumed_from"] == [] and tuned["steps"] == 2 * 4
    same = train(run_of([*copy, "trainer.max_epochs=2", f"resume={last}"], tmp_path / "copy2"))
    assert same["status"] == "completed" and same["steps"] == 2 * 4


# -- a full or read-only disk ----------------------------------------------------------------------

def mounted(path, *options):
    """A tmpfs at `path` (root only): the small or read-only filesystem a test fills."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root and mount(8)")
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(options), "tmpfs", str(path)], capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"tmpfs could not be mounted here: {r.stderr.strip()}")
    return path


def unmount(path):
    subprocess.run(["umount", "-l", str(path)], check=False)


def said_disk_full(r, disk, logger) -> str:
    """A run on the full `disk`: one line (returned), no traceback, a record that says so, no temporary
    or empty file left."""
    assert "Traceback" not in r.stderr and "Exception in thread" not in r.stderr, r.stderr[-3000:]
    lines = [x for x in r.stderr.splitlines() if x.startswith("attnexp:")]
    assert len(lines) == 1 and lines[0].startswith(f"attnexp: disk full: {disk / 'run'} has "), r.stderr[-2000:]
    s = json.loads((disk / "run" / "summary.json").read_text())
    assert s["status"] == "failed" and s["error"].startswith("disk full"), (logger, s["status"])
    assert not [p for p in disk.rglob("*") if p.name.endswith(".tmp")]
    assert not [p for p in disk.rglob("*") if p.is_file() and p.stat().st_size == 0], logger
    return lines[0]


@pytest.mark.slow
def test_a_full_disk_is_one_line_a_record_and_no_temporary_file(tmp_path):
    """Before: a 53-frame chained traceback, summary.json left `running`, an orphan .summary.json.<pid>.tmp;
    then, with TensorBoard (the default logger), its writer thread's 17-line traceback came first,
    summary.json stayed `running` (it could not be rewritten) and a 0-byte GIF was left."""
    for logger in ("none", "tensorboard"):
        disk = mounted(tmp_path / f"disk-{logger}", "size=600k")
        try:
            r = attnexp("train", *QUICK, "trainer.max_epochs=1", "maps.enabled=true", f"logger={logger}",
                        f"hydra.run.dir={disk / 'run'}", cwd=tmp_path)
            assert r.returncode == 1, r.stderr[-2000:]
            line = said_disk_full(r, disk, logger)
            assert "each checkpoint of this model takes about" in line
        finally:
            unmount(disk)


@pytest.mark.slow
def test_a_disk_that_fills_mid_epoch_is_one_line_and_a_true_record(tmp_path):
    """Issue 52: the disk runs full after step 8 of 18, in the middle of epoch 1, while the timeline,
    TensorBoard and the log go on writing: one line, exit 1, a record that says so (or, where even it
    could not be written, no record claiming the run is still running), no temporary or empty file."""
    for logger in ("none", "tensorboard"):
        disk = mounted(tmp_path / f"disk-{logger}", "size=2m")
        try:
            r = attnexp("train", *QUICK, "maps.enabled=true", "maps.every_n_steps=1", "maps.animation=false",
                        f"logger={logger}", f"hydra.run.dir={disk / 'run'}",
                        "+callbacks.fill._target_=helpers.killers.FillDiskAt", f"+callbacks.fill.path={disk / 'filler'}",
                        "+callbacks.fill.step=8", cwd=tmp_path)
            assert r.returncode == 1, (logger, r.stderr[-2000:])
            said_disk_full(r, disk, logger)
        finally:
            unmount(disk)


@pytest.mark.slow
def test_a_maps_folder_made_unwritable_mid_run_is_one_line_and_the_run_continues_after(tmp_path):
    """Issue 52: maps/ remounted read-only after step 8 (the timeline appends a reading every step).
    Before: the timeline's OSError under a 40-frame traceback. Now one line naming the file and what to
    do, a record that says the same, the step's checkpoint kept; writable again, resume=auto finishes."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a read-only filesystem over a folder needs root and mount(8)")
    run = tmp_path / "run"
    args = [*QUICK, "maps.enabled=true", "maps.every_n_steps=1", "maps.animation=false", f"hydra.run.dir={run}"]
    r = attnexp("train", *args, "+callbacks.ro._target_=helpers.killers.ReadOnlyAt", f"+callbacks.ro.path={run / 'maps'}",
                "+callbacks.ro.step=8", cwd=tmp_path)
    try:
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
        said = f"cannot write {run / 'maps' / 'timeline.jsonl'}: read-only file system; make {run / 'maps'} writable again"
        assert r.stderr.strip().startswith(f"attnexp: {said}") and len(r.stderr.strip().splitlines()) == 1, r.stderr[-2000:]
        s = json.loads((run / "summary.json").read_text())
        assert s["status"] == "failed" and s["error"].startswith(said) and s["resume_checkpoint"].endswith("on_exception.ckpt")
    finally:
        unmount(run / "maps")
    r = attnexp("train", *args, "resume=auto", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads((run / "summary.json").read_text())["steps"] == 3 * STEPS_PER_EPOCH


@pytest.mark.slow
def test_a_kill_during_a_checkpoint_save_leaves_no_temporary_file(tmp_path):
    run = tmp_path / "run"
    r = attnexp("train", *QUICK, f"hydra.run.dir={run}", "+callbacks.kill._target_=helpers.killers.KillDuringSave",
                f"+callbacks.kill.marker={tmp_path / 'killed'}", "+callbacks.kill.step=12", cwd=tmp_path)
    assert r.returncode == -signal.SIGKILL, r.stderr[-2000:]
    assert not [p.name for p in run.rglob("*") if p.name.endswith(".tmp")]
    assert step_of(run / "checkpoints" / "last.ckpt") == STEPS_PER_EPOCH
    r = attnexp("train", *QUICK, f"hydra.run.dir={run}", "resume=auto", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads((run / "summary.json").read_text())["steps"] == 3 * STEPS_PER_EPOCH


def test_orphaned_temporary_files_of_dead_processes_are_removed_when_a_run_starts(tmp_path):
    from attnexp.training.checkpointing import remove_orphans

    (tmp_path / "checkpoints").mkdir()
    dead = _dead_pid()
    orphan, live = tmp_path / "checkpoints" / f".last.ckpt.{dead}.tmp", tmp_path / f".summary.json.{os.getpid()}.tmp"
    orphan.write_bytes(b"half"), live.write_bytes(b"being written")
    remove_orphans(tmp_path)
    assert not orphan.exists() and live.exists()


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


@pytest.mark.slow
def test_a_read_only_run_folder_is_one_line(tmp_path):
    """Before: Hydra's own mkdir traceback, before attnexp ran."""
    disk = mounted(tmp_path / "ro", "ro")
    try:
        for args, key in ((["train", f"hydra.run.dir={disk / 'run'}"], "hydra.run.dir"),
                          (["train", "-m", "seed=1,2", f"hydra.sweep.dir={disk / 'sweep'}"], "hydra.sweep.dir")):
            r = attnexp(*args, "logger=none", cwd=tmp_path)
            assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
            assert r.stderr.strip() == (f"attnexp: cannot write the run folder {disk / args[-1].split('=')[1].split('/')[-1]}: "
                                        f"{disk} is on a read-only file system; give a writable folder with {key}=DIR")
        r = attnexp("train", "logger=none", cwd=disk)  # the default outputs/ in a read-only working directory
        assert r.stderr.strip().startswith("attnexp: cannot write the run folder outputs:"), r.stderr[-2000:]
        r = attnexp("train", "logger=none", f"paths.log_dir={disk / 'logs'}", cwd=tmp_path)  # before: a traceback
        assert r.returncode == 1 and r.stderr.strip() == (
            f"attnexp: cannot write the run folder {disk / 'logs'}: {disk} is on a read-only file system; give a "
            f"writable folder with paths.log_dir=DIR"), r.stderr[-2000:]
        s = train(run_of(["trainer.max_epochs=1", "data.n_sentences=100", *QUICK[4:]], tmp_path / "run"))
        t0 = time.time()
        attnexp("eval", f"ckpt={tmp_path / 'nonexistent.ckpt'}", "split=val", cwd=tmp_path)  # refused once started
        start_up = time.time() - t0  # what starting the command costs on this machine now (CI runs two tests at once)
        t0 = time.time()  # before: it evaluated for 39 s on a quiet machine, then failed writing
        r = attnexp("eval", f"ckpt={s['checkpoints']['last']}", "split=val", f"out={disk / 'eval'}", cwd=tmp_path)
        assert r.returncode == 2 and r.stderr.strip() == (
            f"attnexp eval: cannot write the evaluation's folder {disk / 'eval'}: {disk} is on a read-only file "
            f"system; give a writable folder with out=DIR") and time.time() - t0 < start_up + 10, r.stderr[-2000:]
    finally:
        unmount(disk)


def test_a_file_where_the_log_folder_should_be_is_one_line(tmp_path):
    """Before: paths.log_dir on a file gave Hydra's mkdir traceback."""
    (tmp_path / "logs").write_text("a file\n")
    r = attnexp("train", "logger=none", f"paths.log_dir={tmp_path / 'logs' / 'runs'}", cwd=tmp_path)
    assert r.returncode == 1 and r.stderr.strip() == (
        f"attnexp: cannot write the run folder {tmp_path / 'logs' / 'runs'}: {tmp_path / 'logs'} is a file, not a "
        f"folder; give a folder with paths.log_dir=DIR"), r.stderr[-2000:]


def test_an_improving_epoch_writes_one_checkpoint_and_links_the_other(tmp_path):
    """Before: an epoch whose monitor improved wrote and fsynced two whole checkpoints (best and
    last: about 3 GB an epoch at GPT-2 small's size). Now last.ckpt is a hard link to the best file
    written at that step, and a later save still replaces last.ckpt without touching the best."""
    s = train(run_of([*QUICK[:3], "trainer.max_epochs=2", *QUICK[4:]], tmp_path))
    ckpt = tmp_path / "checkpoints"
    best, last = Path(s["checkpoints"]["best"]), ckpt / "last.ckpt"
    assert s["metrics"]["best"]["checkpoint"].endswith("best-epoch01.ckpt")  # val/loss improved every epoch
    assert os.stat(best).st_ino == os.stat(last).st_ino
    assert step_of(last) == s["steps"] == 2 * STEPS_PER_EPOCH
    plateau = train(run_of([*PLATEAU[:3], "trainer.max_epochs=2", *PLATEAU[4:]], tmp_path / "plateau"))
    pbest, plast = Path(plateau["checkpoints"]["best"]), tmp_path / "plateau" / "checkpoints" / "last.ckpt"
    assert os.stat(pbest).st_ino != os.stat(plast).st_ino
    assert step_of(pbest) == STEPS_PER_EPOCH and step_of(plast) == 2 * STEPS_PER_EPOCH


@pytest.mark.slow
def test_a_disk_already_full_when_the_run_starts_is_one_line(tmp_path):
    """Issue 52. Before: Hydra's traceback (writing .hydra/config.yaml) and no record."""
    disk = mounted(tmp_path / "full", "size=400k")
    try:
        with open(disk / "filler", "wb", buffering=0) as f:
            try:
                while True:
                    f.write(b"\0" * 4096)
            except OSError:
                pass
        r = attnexp("train", *QUICK, "trainer.max_epochs=1", f"hydra.run.dir={disk / 'run'}", cwd=tmp_path)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
        lines = [x for x in r.stderr.splitlines() if x.startswith("attnexp:")]
        assert len(lines) == 1 and lines[0].startswith(f"attnexp: disk full: cannot write the run folder {disk / 'run'}"), \
            r.stderr[-1000:]
        assert sorted(p.name for p in disk.iterdir()) == ["filler"]
    finally:
        unmount(disk)
