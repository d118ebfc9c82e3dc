"""What attnexp/compat/lightning.py relies on in the installed Lightning: if an upgrade
changes it, this fails, naming the attribute, before a sweep does."""

from __future__ import annotations

import inspect


def test_the_ddp_child_watcher_is_what_release_ddp_children_expects():
    from lightning.fabric.strategies.launchers import subprocess_script as s

    observer = s._ChildProcessObserver(main_pid=0, child_processes=[])
    assert observer._child_processes == [], "_ChildProcessObserver._child_processes is gone"
    assert "os.kill(self._main_pid" in inspect.getsource(s._ChildProcessObserver._terminate_all)
    assert "_child_processes" in inspect.getsource(s._ChildProcessObserver._run)


def test_mixed_precision_is_what_clip_unscaled_fused_expects():
    from lightning.pytorch.plugins.precision import MixedPrecision, Precision

    assert MixedPrecision("bf16-mixed", "cpu").scaler is None, "MixedPrecision.scaler is gone or set for bf16"
    assert "_optimizer_handles_unscaling" in inspect.getsource(MixedPrecision.clip_gradients)
    assert "clip_val" in inspect.signature(Precision.clip_gradients).parameters


def test_the_loop_and_logger_parts_the_adapter_reads_are_there(tmp_path):
    import lightning as L
    from lightning.pytorch.loggers import WandbLogger

    from attnexp.compat import lightning as lp

    t = L.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False, default_root_dir=tmp_path)
    assert lp.on_last_batch(t) is False and lp.steps_logged(t) == 0 and lp.fit_position(t) == (0, 0)
    lp.request_stop(t)
    assert t._signal_connector.received_sigterm is True
    lp.request_stop(t, False)
    assert t._signal_connector.received_sigterm is False
    assert lp.wandb_started(WandbLogger(offline=True, save_dir=str(tmp_path))) is False
    from lightning.pytorch.callbacks import ModelCheckpoint

    cb = ModelCheckpoint(dirpath=tmp_path)
    assert lp.saved_at_step(cb, t) is None
    cb._last_checkpoint_saved, cb._last_global_step_saved = str(tmp_path / "best.ckpt"), t.global_step
    assert lp.saved_at_step(cb, t) == str(tmp_path / "best.ckpt")
