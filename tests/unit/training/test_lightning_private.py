"""What attnexp/training/lightning_private.py relies on in the installed Lightning: if an upgrade
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
