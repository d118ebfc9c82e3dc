"""Counting the calls that make a GPU's host wait for the device, on any device: a TorchFunctionMode
sees the Python-level reads (`item`, `tolist`, `float(t)`, `.cpu()`, `.numpy()`, ...) and a
TorchDispatchMode the aten ops that size their output from the data (`nonzero`, `bincount`, `unique`,
...) or read a scalar (`_local_scalar_dense`). A CPU run takes the same code path as a GPU run, so
what is counted here is what a GPU run would wait for."""

from __future__ import annotations

import traceback
import weakref
from collections import defaultdict

import lightning as L
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

READS = {"item", "tolist", "__bool__", "__float__", "__int__", "__index__", "cpu", "numpy", "nonzero", "bincount",
         "unique", "masked_select", "argwhere", "__array__", "any", "all"}
ATEN_READS = ("_local_scalar_dense", "nonzero", "bincount", "unique", "masked_select", "repeat_interleave")


class Counter:
    def __init__(self):
        self.step: int | None = None
        self.per_step: dict[int, list[str]] = defaultdict(list)
        self.depth = 0
        # Tensors on the host on a GPU too: what an explicit copy to the CPU returned, and what ops on
        # only such tensors return. Reading them costs no wait (the copy was the read, counted there).
        self._host: dict[int, weakref.ref] = {}

    def mark_host(self, t: torch.Tensor) -> None:
        self._host[id(t)] = weakref.ref(t)

    def on_host(self, t: torch.Tensor) -> bool:
        ref = self._host.get(id(t))
        return ref is not None and ref() is t

    def note(self, what: str) -> None:
        if self.step is None or self.depth:
            return
        frames = [f for f in traceback.extract_stack()[:-3] if "host_reads.py" not in f.filename]
        where = next((f"{f.filename.rsplit('site-packages/', 1)[-1]}:{f.lineno} {f.name}" for f in reversed(frames)), "?")
        self.per_step[self.step].append(f"{what} at {where}")


class FunctionReads(TorchFunctionMode):
    def __init__(self, counter: Counter):
        super().__init__()
        self.c = counter

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        on_host = bool(tensors) and all(self.c.on_host(t) for t in tensors)
        # `.to("cpu")` / `.to("cpu", copy=True)` are copies to the host; `.to(device)` with a torch.device
        # (clip_grad_norm_'s, Lightning's moves) goes to the tensors' own device: on a GPU, no copy
        to_cpu = name == "cpu" or (name == "to" and any(isinstance(a, str) and a == "cpu"
                                                       for a in (*args[1:], kwargs.get("device"))))
        # `any`/`all` read only when a Python `if` asks; the Python-level conversion is what is counted
        reads = (name in READS - {"any", "all"} or to_cpu) and args and isinstance(args[0], torch.Tensor)
        if reads and not on_host:
            self.c.note(name)
        self.c.depth += bool(reads)  # what it dispatches to is the same read
        try:
            out = func(*args, **kwargs)
        finally:
            self.c.depth -= bool(reads)
        if (to_cpu or on_host) and isinstance(out, torch.Tensor):
            self.c.mark_host(out)
        return out


class DispatchReads(TorchDispatchMode):
    def __init__(self, counter: Counter):
        super().__init__()
        self.c = counter

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.__name__.split(".")[0] in ATEN_READS:
            self.c.note(f"aten.{func.__name__}")
        return func(*args, **(kwargs or {}))


class StepMarks(L.Callback):
    """Marks which training step the reads belong to: from one batch's start to the next's (what
    Lightning does after the callbacks' on_train_batch_end belongs to the step that ended)."""

    def __init__(self, counter: Counter):
        self.c = counter
        self.steps: set[int] = set()
        self.logging_steps: set[int] = set()
        self.last_of_epoch: set[int] = set()
        self.reading_steps: set[int] = set()  # steps after which the maps' timeline takes a light reading

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        from attnexp.training.maps_callback import AttentionMaps

        self.c.step = trainer.global_step
        self.steps.add(trainer.global_step)
        maps = next((cb for cb in trainer.callbacks if isinstance(cb, AttentionMaps)), None)
        if maps is not None and trainer.global_step + 1 in maps._schedule:  # read after this step's update
            self.reading_steps.add(trainer.global_step)
        every = trainer.log_every_n_steps
        if every and (trainer.fit_loop.epoch_loop._batches_that_stepped + 1) % every == 0:
            self.logging_steps.add(trainer.global_step)
        if batch_idx + 1 >= trainer.num_training_batches:
            self.last_of_epoch.add(trainer.global_step)

    def on_train_end(self, trainer, pl_module):
        self.c.step = None

    def between_logging_steps(self) -> dict[int, list[str]]:
        """The reads of every step that is neither a logging step, an epoch's last (validation) nor
        one the maps' timeline reads the heads after (a few tens a run, dense early)."""
        skip = self.logging_steps | self.last_of_epoch | self.reading_steps
        return {s: r for s, r in self.c.per_step.items() if s not in skip and r}

    def checked_steps(self) -> set[int]:
        """The steps between_logging_steps holds to no read."""
        return self.steps - self.logging_steps - self.last_of_epoch - self.reading_steps

    def at_logging_steps(self) -> dict[int, list[str]]:
        return {s: r for s, r in self.c.per_step.items() if s in self.logging_steps - self.last_of_epoch - self.reading_steps}
