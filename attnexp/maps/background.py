"""Pictures drawn off the training thread.

A snapshot's numbers (the maps, the heads' reading, the .npz) are taken on the training thread at
the moment they describe; its pictures (a grid per example, the head tables, the timeline, each
GIF frame's encoding) take ~0.1 s a snapshot and do not need the training thread at all. `Drawer`
runs them on one worker thread, in the order they were given, while training goes on: on a GPU the
host thread keeps queueing kernels (the pictures had stalled it ~0.1 s an epoch), on a CPU the
worker runs in what the training threads leave free (Pillow and zlib release the GIL while they
encode). What the loggers get is handed back to the training thread (`collect`), which logs it at
the step the snapshot was taken: the loggers are only ever called from one thread.

concurrent.futures, not a queue of our own: one worker, results in order, the worker's exception
raised on the training thread when its result is collected.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


class Drawer:
    def __init__(self, background: bool = True):
        self.background = background
        self._pool: ThreadPoolExecutor | None = None  # started with the first job, stopped by close
        self._pending: deque[tuple[Future, Callable[[Any], None] | None]] = deque()

    def submit(self, job: Callable[[], Any], then: Callable[[Any], None] | None = None) -> None:
        """Run `job` on the worker (or here, with background=False); `then(result)` runs on the
        calling thread when it is collected."""
        if not self.background:  # here and now: nothing is ever pending, an error is raised at once
            result = job()
            if then is not None:
                then(result)
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="attnexp-maps")
        self._pending.append((self._pool.submit(job), then))

    def collect(self, wait: bool = False) -> None:
        """Hand the finished jobs' results to their `then`, oldest first (a cheap check when none
        is finished: the training callback calls it after every step). `wait`: every job."""
        while self._pending and (wait or self._pending[0][0].done()):
            future, then = self._pending.popleft()
            result = future.result()
            if then is not None:
                then(result)

    @property
    def pending(self) -> int:
        return len(self._pending)

    def close(self) -> None:
        """Wait for every job, hand the results over, and stop the worker (a later job starts
        another). A job's exception is raised here, after the jobs before it were handed over (the
        ones after it are dropped)."""
        try:
            self.collect(wait=True)
        finally:
            self._pending.clear()
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None
