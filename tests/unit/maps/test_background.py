"""The maps' pictures off the training thread (maps.background): the Drawer's order, hand-back and
errors, the GIF built a frame at a time, and a real fit that draws on the worker and still writes
and logs every picture."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from PIL import Image, ImageSequence

from attnexp.maps import render
from attnexp.maps.background import Drawer


def test_jobs_run_in_order_off_the_calling_thread_and_hand_back_on_it():
    d, seen, threads = Drawer(), [], []

    def job(i):
        time.sleep(0.02 if i == 0 else 0)  # the first is the slowest: results still come back in order
        threads.append(threading.current_thread().name)
        return i

    for i in range(4):
        d.submit(lambda i=i: job(i), lambda r: seen.append((r, threading.current_thread().name)))
    d.close()
    assert [r for r, _ in seen] == [0, 1, 2, 3]
    assert all(t.startswith("attnexp-maps") for t in threads)
    assert {t for _, t in seen} == {threading.current_thread().name}
    d.submit(lambda: 5, lambda r: seen.append((r, "again")))  # a closed drawer starts another worker
    d.close()
    assert seen[-1] == (5, "again") and d.pending == 0


def test_a_jobs_error_is_raised_on_the_calling_thread_after_the_ones_before_it():
    d, seen = Drawer(), []
    d.submit(lambda: 1, seen.append)
    d.submit(lambda: 1 / 0, seen.append)
    d.submit(lambda: 3, seen.append)
    with pytest.raises(ZeroDivisionError):
        d.close()
    assert seen == [1] and d.pending == 0


def test_in_the_foreground_a_job_runs_at_once_on_the_calling_thread():
    d, seen = Drawer(background=False), []
    d.submit(lambda: threading.current_thread().name, seen.append)
    assert seen == [threading.current_thread().name] and d.pending == 0
    with pytest.raises(ZeroDivisionError):
        d.submit(lambda: 1 / 0)


def _frames(n: int) -> list[Image.Image]:
    rng = np.random.default_rng(0)
    return [render.to_palette(render.grid(rng.dirichlet(np.ones(6), size=(2, 2, 6)), list("abcdef"), f"frame {k}"))
            for k in range(n)]


def test_a_gif_built_a_frame_at_a_time_holds_every_frame_as_drawn(tmp_path):
    frames = _frames(3)
    for f in frames:  # the snapshot writes each as a PNG first: Pillow then keeps the PNG encoder's settings on it
        render.to_png(f)
    anim = render.Animation(ms_per_frame=500)
    for f in frames:
        anim.add(f)
    anim.write(tmp_path / "a.gif")
    gif = Image.open(tmp_path / "a.gif")
    assert gif.n_frames == 3 and gif.info["loop"] == 0
    for k, f in enumerate(ImageSequence.Iterator(gif)):
        assert f.info["duration"] == 500
        assert np.array_equal(np.asarray(f.convert("RGB")), np.asarray(frames[k].convert("RGB"))), k


def test_a_run_draws_its_pictures_on_the_worker_and_writes_and_logs_them_all(tmp_path, monkeypatch):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from attnexp.api import load_run, train
    from attnexp.maps import snapshot
    from helpers.runs import compose_cfg

    drawn_on, draw = [], snapshot.draw

    def spy(*a, **k):
        drawn_on.append(threading.current_thread().name)
        return draw(*a, **k)

    monkeypatch.setattr(snapshot, "draw", spy)
    quick = ["trainer.enable_progress_bar=false", "data.n_sentences=400", "trainer.max_epochs=2", "maps.n_examples=2",
             "logger=tensorboard"]
    for background, out in ((True, tmp_path / "bg"), (False, tmp_path / "fg")):
        drawn_on.clear()
        train(load_run(compose_cfg([*quick, f"maps.background={str(background).lower()}"], out)))
        assert len(drawn_on) == 3  # the start and 2 epochs
        assert all(t.startswith("attnexp-maps") == background for t in drawn_on), drawn_on
        maps = out / "maps"
        assert Image.open(maps / "evolution_ex1.gif").n_frames == 3 and (maps / "timeline.png").is_file()
        assert (maps / "epoch001_ex1.png").is_file() and (maps / "epoch001_roles.png").is_file()
        ev = EventAccumulator(str(out / "tensorboard"), size_guidance={"images": 0}).Reload()
        # the timeline once an epoch, then once more at the end with its formations (issue 53)
        assert [len(ev.Images(t)) for t in ("attention_maps/example1", "head_roles", "heads_timeline")] == [3, 3, 3]
    bg, fg = (np.asarray(Image.open(tmp_path / d / "maps" / "epoch001_ex0.png")) for d in ("bg", "fg"))
    assert np.array_equal(bg, fg)  # the same picture wherever it was drawn
