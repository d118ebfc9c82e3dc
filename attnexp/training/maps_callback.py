"""AttentionMaps: a Lightning callback that takes the probe set's maps when training starts (the
`start` snapshot: the pretrained weights of a fine-tune, the initialisation otherwise) and every
`every_n_epochs`, logs grids + per-head statistics to the configured loggers, including how far
each head moved from its start (`drift`), and saves them under <run>/maps/; at the end of training
it writes a GIF per example and viewer.html. Between them, on a step schedule dense early
(maps.timeline), a light reading of every head's numbers (no pictures) goes to maps/timeline.jsonl,
and at the end the steps where heads formed (heads.timeline). The maps themselves (probe,
statistics, pictures, viewer) are attnexp.maps's; this is the training-time driver."""

from __future__ import annotations

import dataclasses
import logging
from functools import partial
from pathlib import Path

import lightning as L
import numpy as np
from lightning.pytorch.utilities import rank_zero_only
from PIL import Image

from attnexp.compat.lightning import steps_logged
from attnexp.config import ALIGN_BEST, MapsConfig, layout
from attnexp.heads import changes, llc, quantities
from attnexp.heads import timeline as tl
from attnexp.heads.analysis import Analysis, Context, context_of, induction_pair, read_heads
from attnexp.heads.probe import Probe, attention_maps, light_reading, plain_probe, probe_from
from attnexp.maps import render, snapshot
from attnexp.maps.background import Drawer
from attnexp.maps.html import Viewer, timeline_data
from attnexp.maps.view import is_signed
from attnexp.training.checkpointing import check_state
from attnexp.training.loggers import log_histogram, log_image, log_layout, log_table

log = logging.getLogger("attnexp")


class AttentionMaps(L.Callback):
    def __init__(self, cfg: MapsConfig, out_dir: Path):
        self.cfg, self.dir = cfg, Path(out_dir) / layout.MAPS
        # the timeline's light reading: every per-head number and the roles, none of the pictures' methods
        self._light = dataclasses.replace(cfg, roles=True, importance=False, rollout=False, flow=False, relevance=False)
        self.probe: Probe | None = None
        self.plain: Probe | None = None  # plain held-out windows beside a probe that carries planted repeats
        self._probe_is_plain = False
        self.animations: dict[int, render.Animation] = {}  # example -> its GIF, a frame per snapshot (drawing thread)
        self._drawer = Drawer(cfg.background)  # the pictures, off the training thread (maps.background)
        self.viewer: Viewer | None = None  # viewer.html's data, added to at every snapshot
        self.written: list[str] = []  # the files of the maps folder the end of a run names, as they are written
        self.shape: tuple[int, int] = (0, 0)  # layers, heads
        self.last_alignment: dict | None = None
        self._last = None  # the last snapshot's weights (maps.bertviz writes them at the end)
        self._start = None  # the start snapshot's weights: each head's drift is measured from them
        self._resumed_epochs: list[int] = []
        self._ctx: Context | None = None  # what the analysis needs besides the maps (built once)
        self._class_names: list[str] | None = None
        self._laid_out = False  # the dashboards' chart layout is written with the first snapshot's scalars
        self._schedule: frozenset[int] = frozenset()  # the steps a light reading is taken after (maps.timeline)
        self._read_through = -1  # the last step read (every rank keeps it; rank 0 reads)
        self._resume_read: int | None = None  # the last step the resumed checkpoint had read
        self._writer: tl.Writer | None = None
        self._llc: llc.Reader | None = None  # the LLC at some readings (maps.llc)
        self.timeline_summary: dict | None = None  # what summary.json says of the timeline (at the end)
        self._timeline_view: dict | None = None  # the viewer's share of it (maps.html.timeline_data)

    def setup(self, trainer, pl_module, stage):
        self._stage = stage  # runs before a checkpoint is restored
        if self.probe is None and trainer.datamodule is not None:
            self.probe = probe_from(trainer.datamodule, self.cfg.texts, self.cfg.n_examples)
            self.plain, self._probe_is_plain = plain_probe(trainer.datamodule, self.cfg.texts, self.cfg.n_examples)
            self._class_names = getattr(trainer.datamodule, "class_names", None)

    # A resumed run picks up the snapshots of its earlier part from <run>/maps/, so the viewer and
    # the GIFs cover the whole run; only the list of epochs travels in the checkpoint.
    def state_dict(self) -> dict:
        return {"epochs": self.viewer.epochs if self.viewer else [], "last_alignment": self.last_alignment,
                "timeline_step": self._read_through}

    def load_state_dict(self, state: dict) -> None:
        if getattr(self, "_stage", "fit") == "fit":  # not trainer.test(ckpt_path=best)'s restore
            check_state(state)  # a checkpoint is a stranger's file: its callback state too
            self._resumed_epochs, self.last_alignment = state["epochs"], state["last_alignment"]
            self._resume_read = state.get("timeline_step")

    def on_fit_start(self, trainer, pl_module):
        if self.probe is None:
            return
        start = snapshot.npz(self.dir, snapshot.START)
        if self.cfg.timeline and trainer.is_global_zero:
            self._writer = tl.Writer(self.dir / tl.FILE)  # its sizes: the maps' own, at the first reading
            try:
                self._writer.start(keep_through=self._resume_read if trainer.ckpt_path else None)
            except tl.TimelineError as e:  # a folder where the file goes: one line, and no timeline this run
                log.warning("%s", e)
                self._writer = None
            self._read_through = self._resume_read if trainer.ckpt_path and self._resume_read is not None else -1
        if trainer.ckpt_path:  # a resumed run: its first part took the start; the model now is not the start
            if start.is_file() and (snap := self._read(start, pl_module)) is not None:
                self._start = snap.weights.astype(np.float32)
        elif trainer.is_global_zero:
            self._take_start(trainer, pl_module)
        for epoch in self._resumed_epochs:
            npz = snapshot.npz(self.dir, epoch)
            if npz.is_file() and (snap := self._read(npz, pl_module)) is not None:
                self._add_to_viewer(epoch, snap.weights, snap.analysis)
            for b in range(len(self.probe.tokens)) if self.cfg.animation else ():
                png = snapshot.example_png(self.dir, snapshot.stem(epoch), b)
                if png.is_file():
                    self._drawer.submit(partial(self._add_frame, b, png))
        self._resumed_epochs = []

    def _add_frame(self, b: int, frame: Image.Image | Path) -> None:
        """Example b's next GIF frame, encoded now (on the drawing thread): a grid, or a resumed run's PNG of one."""
        if isinstance(frame, Path):
            with Image.open(frame) as im:
                frame = im.copy()
        self.animations.setdefault(b, render.Animation()).add(frame)

    def _read(self, path: Path, pl_module) -> snapshot.Snapshot | None:
        """A snapshot the first part of a resumed run wrote, weights included; one that is not a
        snapshot (`snapshot.read`), or whose maps are bigger than this run's model and probe make them
        (layers x examples x heads x tokens^2 float32), is left out with one line: a small file must not
        unpack into gigabytes of weights."""
        m = pl_module.model.m
        T = max(self.probe.lengths, default=0)
        bound = m.n_layers * len(self.probe.ids) * m.n_heads * T * T * 4
        try:
            snap = snapshot.read(path, weights=True, max_weights=bound)
        except snapshot.SnapshotError as e:
            log.warning("maps: left out %s: %s", path, e)
            return None
        if snap.weights is None:
            log.warning("maps: left out %s: it holds no weights", path)
            return None
        return snap

    def _take_start(self, trainer, pl_module) -> None:
        """The maps before the first step: the reference every later snapshot's drift is measured from,
        and the timeline's first reading (step 0)."""
        w, token_loss, _, _, plain_loss = light_reading(pl_module.model, self.probe, trainer.datamodule.pad_id, None, None,
                                                        self.plain)
        self._start = w
        if self._writer is not None:
            self._append_reading(trainer, pl_module, 0, w, token_loss, None, plain_loss=plain_loss)
        self.dir.mkdir(parents=True, exist_ok=True)
        a = self.analyse(trainer, pl_module, w)
        # step 0: each dashboard's image slider starts where the viewer does
        self._snapshot(trainer, snapshot.START, w, a, "start (before training)", step=0, log_step=0)

    def _snapshot(self, trainer, epoch: int, w: np.ndarray, a: Analysis, title: str, step: int, log_step: int) -> None:
        """A snapshot (the start's and every epoch's alike): its .npz and the viewer's share now, on the
        training thread (a run killed a moment later resumes with it); its pictures on the drawing
        thread, to the loggers at `log_step` when they are done."""
        stem = snapshot.stem(epoch)
        snapshot.write(self.dir, stem, w, self.probe, a, self.cfg, epoch=epoch, step=step)
        self._add_to_viewer(epoch, w, a)
        self._drawer.submit(partial(self._draw, stem, w, a, title), partial(self._pictured, trainer, log_step))

    def _draw(self, stem: str, w: np.ndarray, a: Analysis, title: str) -> tuple[list, dict]:
        """On the drawing thread: the snapshot's pictures (snapshot.draw), each example's grid a frame of its GIF."""
        grids, pictures = snapshot.draw(self.dir, stem, w, self.probe, a, title, self.cfg)
        for b, (img, _) in enumerate(grids) if self.cfg.animation else ():
            self._add_frame(b, img)
        return grids, pictures

    def _pictured(self, trainer, step: int, drawn: tuple[list, dict]) -> None:
        """Back on the training thread: a snapshot's grids and head pictures to the loggers at `step`."""
        grids, pictures = drawn
        for b, (img, png) in enumerate(grids) if self.cfg.images_to_logger else ():
            log_image(trainer.loggers, f"attention_maps/example{b}", img, png, step)
        for name, (img, png) in pictures.items() if self.cfg.images_to_logger else ():
            log_image(trainer.loggers, f"head_{name}", img, png, step)

    # --- the timeline: light readings on the step schedule ------------------------------------------

    def on_train_start(self, trainer, pl_module):
        if not self.cfg.timeline or self.probe is None:
            return
        total = trainer.estimated_stepping_batches
        total = int(total) if total != float("inf") else 10**7  # max_epochs=-1: the log schedule goes on
        self._schedule = frozenset(tl.schedule(total, self.cfg.timeline_points, self.cfg.every_n_steps))
        if self.cfg.llc and trainer.is_global_zero:
            dm = trainer.datamodule
            table = dm.table("train", per_epoch=True)
            self._llc = llc.Reader(self.cfg, sorted(self._schedule), table.ids, table.lengths, dm.seed)
        if self.cfg.every_n_steps and total // self.cfg.every_n_steps > tl.MAX_READINGS:
            log.warning("maps.every_n_steps=%d gives %d readings over %d steps: the timeline keeps the first %d",
                        self.cfg.every_n_steps, total // self.cfg.every_n_steps, total, tl.MAX_READINGS)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        """A light reading after a scheduled optimizer step: a Python set lookup on every other step
        (no host read); at a reading, the probe pass and the step's loss (rank 0). The pictures the
        drawing thread has finished go to the loggers here."""
        if self._drawer.pending:
            self._drawer.collect()
        step = trainer.global_step
        if step <= self._read_through or step not in self._schedule:
            return
        self._read_through = step
        if trainer.is_global_zero and self._writer is not None:
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            ctx = self.context(trainer, pl_module)
            pair = induction_pair(ctx)
            # everything the reading needs from the device in one transfer
            w, token_loss, pair_maps, loss, plain_loss = light_reading(
                pl_module.model, self.probe, trainer.datamodule.pad_id, pair if self._light.roles else None, loss, self.plain)
            self._append_reading(trainer, pl_module, step, w, token_loss, loss, pair_maps, plain_loss)

    def _append_reading(self, trainer, pl_module, step: int, w: np.ndarray, token_loss, loss: float | None,
                        pair_maps: np.ndarray | None = None, plain_loss: np.ndarray | None = None) -> None:
        a = read_heads(pl_module.model, self.probe, w, trainer.datamodule.pad_id, self._light, self.context(trainer, pl_module),
                       self._start, pair_maps)  # the light reading: every per-head number and the roles, no pictures
        probe_loss = icl = None
        if token_loss is not None:
            real = np.arange(token_loss.shape[1])[None, :] < (np.asarray(self.probe.lengths) - 1)[:, None]
            probe_loss = float(token_loss[real].mean()) if real.any() else None
            icl = tl.icl_score(token_loss, self.probe.lengths)
        icl_plain = (tl.icl_score(plain_loss, self.plain.lengths) if plain_loss is not None
                     else icl if self._probe_is_plain else None)
        lc, lc_std = self._llc.at(step, pl_module.model) if self._llc is not None else (None, None)
        try:
            self._writer.append(tl.Reading(step, trainer.current_epoch, a.scores, loss, probe_loss, icl, lc, lc_std,
                                           icl_plain))
        except tl.TimelineError as e:  # its file replaced by a link, a pipe or a folder mid-run: one line, no timeline
            log.warning("%s", e)
            self._writer = None
            return
        scalars = {f"timeline/heads_{r}": float(n) for r, n in zip(*np.unique(a.roles, return_counts=True))}
        for key, value in (("icl", icl), ("icl_plain", icl_plain), ("llc", lc)):
            if value is not None and np.isfinite(value):
                scalars[f"timeline/{key}"] = value
        for lg in trainer.loggers if step else ():  # a few numbers, not a wall of per-head curves
            lg.log_metrics(scalars, step=step)

    def on_validation_epoch_end(self, trainer, pl_module):
        if trainer.sanity_checking or self.probe is None or (trainer.current_epoch + 1) % self.cfg.every_n_epochs:
            return
        best = None
        if trainer.is_global_zero:  # one probe pass, on rank 0 (the other ranks hold the same weights)
            w = attention_maps(pl_module.model, self.probe, trainer.datamodule.pad_id)
            log.info("attention maps of epoch %d: %d examples", trainer.current_epoch, len(self.probe.ids))
            a = self.analyse(trainer, pl_module, w)
            scalars = {**quantities.flat(a.scores, per_head=self.cfg.head_scalars), **a.scalars()}
            if "alignment" in a.scores:
                scores = a.scores["alignment"]
                layer, head = np.unravel_index(scores.argmax(), scores.shape)
                self.last_alignment = {"best": float(scores.max()), "layer": int(layer), "head": int(head)}
                best = float(scores.max())
                scalars.update({"align/best_layer": float(layer), "align/best_head": float(head)})
            for lg in trainer.loggers:  # straight to the loggers: ~50 scalars through self.log cost ~20 ms an epoch
                lg.log_metrics(scalars, step=steps_logged(trainer))
            if not self._laid_out:  # how the dashboards group the charts (TensorBoard's Custom Scalars), once
                log_layout(trainer.loggers, list(scalars))
                self._laid_out = True
            for name, values in quantities.shown("histogram", a.scores).items():  # one histogram a quantity (no picture)
                log_histogram(trainer.loggers, f"heads/{name}", np.asarray(values, dtype=float).ravel(), steps_logged(trainer))
            self.save(trainer, w, a)
        if self.probe.targets:  # every rank logs it, so checkpoint.monitor=align/best works everywhere
            pl_module.log(ALIGN_BEST, trainer.strategy.broadcast(best, src=0), on_epoch=True)

    def context(self, trainer, pl_module) -> Context:
        """Built once (analysis.context_of), with `loss_of` on a fixed validation batch when
        maps.importance is on."""
        if self._ctx is None:
            dm, loss_of = trainer.datamodule, None
            if self.cfg.importance and dm.splits.get("val"):
                batch = dm.collator(per_epoch=False)(dm.splits["val"][: self.cfg.importance_examples])

                def loss_of(head_mask_LH):
                    return pl_module.evaluate(batch, head_mask_LH)
            self._ctx = context_of(pl_module.model, self.probe, dm.first_word_id, loss_of, pool=dm.frequent_tokens())
        return self._ctx

    def analyse(self, trainer, pl_module, w: np.ndarray) -> Analysis:
        """The heads' reading (heads.analysis.read_heads), drift measured from the maps before training."""
        return read_heads(pl_module.model, self.probe, w, trainer.datamodule.pad_id, self.cfg,
                          self.context(trainer, pl_module), self._start if w is not self._start else None)

    @rank_zero_only
    def save(self, trainer, w: np.ndarray, a: Analysis) -> None:
        epoch, step, at = trainer.current_epoch, trainer.global_step, steps_logged(trainer)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._snapshot(trainer, epoch, w, a, f"epoch {epoch} (step {step})", step=step, log_step=at)
        self._last = w
        if self._writer is not None and self.cfg.images_to_logger:  # the timeline so far, one picture an epoch
            t = self._writer.timeline()
            self._drawer.submit(partial(self._timeline_png, t), partial(self._timeline_pictured, trainer, at))
        log_stats_table(trainer, quantities.shown("table", a.scores), at, a.roles)

    def _timeline_png(self, t: tl.Timeline) -> tuple | None:
        drawn = self.timeline_picture(t)
        return None if drawn is None else (drawn, render.to_png(drawn))

    @staticmethod
    def _timeline_pictured(trainer, step: int, drawn: tuple | None) -> None:
        if drawn is not None:
            log_image(trainer.loggers, "heads_timeline", *drawn, step)

    def on_fit_end(self, trainer, pl_module):
        self.finish(trainer)

    def on_exception(self, trainer, pl_module, exception):  # an interrupted run keeps its viewer and GIFs too
        try:
            self.finish(trainer)
        except OSError as e:  # e.g. the disk that just filled up: the run's own exception is the one to report
            from attnexp.training.stops import disk_full

            (log.debug if disk_full(e) else log.warning)("maps: the viewer and GIFs could not be written (%s)", e)

    def timeline_picture(self, t: tl.Timeline, formed=(), moved=()) -> object | None:
        """The timeline `t`, drawn (render.timeline) with these formations and changes; None without
        two readings."""
        return render.timeline(t, list(formed), list(moved), self.dir.parent.name) if len(t.readings) >= 2 else None

    def finish_timeline(self, trainer=None) -> None:
        """At the end: the change points (heads.changes), said in the log, kept for summary.json and
        the viewer, and maps/timeline.png; to the loggers, that picture (formations outlined) at the
        last step and the curve of each head that formed (only those: a few tags, not one a head)."""
        t = self._writer.timeline()
        if len(t.readings) < 2:
            return
        formed, moved, why = [], [], None
        if self.cfg.change_points is False:
            why = "maps.change_points=false"
        elif not changes.available():
            why = changes.NEEDS
        else:
            formed, moved = changes.formations(t), changes.changes(t) + llc.changes(t)
        self.timeline_summary = {"file": str(self._writer.path), "readings": len(t.readings),
                                 "steps": [int(t.steps[0]), int(t.steps[-1])],
                                 "formations": [f.as_dict() for f in formed], "changes": [c.as_dict() for c in moved],
                                 **({"change_points_skipped": why} if why else {}),
                                 **({"llc": self._llc.summary() | ({} if why else llc.stages_said(t))} if self._llc else {})}
        for f in formed[:12]:
            log.info("heads: %s", f.line())
        if len(formed) > 12:
            log.info("heads: ... and %d more formations (summary.json, maps/timeline.png)", len(formed) - 12)

        self._timeline_view = timeline_data(t, formed, render.TIMELINE_SHOWN, moved)
        if trainer is not None and formed and self.cfg.images_to_logger:
            self.log_formed_curves(trainer, t, formed)
        last = int(t.steps[-1])

        def draw():
            img = self.timeline_picture(t, formed, moved)
            render.write_png(img, self.dir / layout.TIMELINE_PICTURE)
            return img, render.to_png(img)

        logged = (lambda drawn: log_image(trainer.loggers, "heads_timeline", *drawn, last)) \
            if trainer is not None and self.cfg.images_to_logger else None
        self._drawer.submit(draw, logged)

    @staticmethod
    def log_formed_curves(trainer, t: tl.Timeline, formed: list) -> None:
        """`timeline/L{l}H{h}/{score}` at every reading, for each head that formed and the score it formed by."""
        for f in {(f.layer, f.head, f.quantity): f for f in formed}.values():
            curve = t.curve(f.quantity)[:, f.layer, f.head]
            key = f"timeline/L{f.layer}H{f.head}/{f.quantity}"
            for lg in trainer.loggers:
                for step, value in zip(t.steps, curve):
                    if step and np.isfinite(value):
                        lg.log_metrics({key: float(value)}, step=int(step))

    @rank_zero_only
    def finish(self, trainer):
        if self._writer is not None:
            self.finish_timeline(trainer)
        self._drawer.submit(self._write_gifs)
        if self.cfg.html and self.viewer is not None and self.viewer.epochs:
            self.viewer.write(self.dir / layout.VIEWER, str(Path(trainer.default_root_dir).name), self.cfg.scale, *self.shape,
                              timeline=self._timeline_view)
            self.written.append(layout.VIEWER)
        if self.cfg.bertviz and self._last is not None:  # the last snapshot, in bertviz's views
            from attnexp.maps import bertviz_export

            bertviz_export.write(self.dir, self._last, self.probe)
        self._drawer.close()  # every picture written and logged before the run says where they are

    def _write_gifs(self) -> None:
        for b, anim in self.animations.items():  # each frame was encoded as it came: this writes bytes
            anim.write(self.dir / layout.gif(b))
            self.written.append(layout.gif(b))

    def _add_to_viewer(self, epoch: int, w: np.ndarray, a: Analysis | None = None) -> None:
        if not self.cfg.html:
            return
        if self.viewer is None:  # signed or not is the variant's, fixed by the first snapshot
            self.viewer = Viewer(self.probe.tokens, self.cfg.viewer_tokens, self.cfg.long, signed=is_signed(w),
                                 class_names=self._class_names)
            self.shape = (w.shape[0], w.shape[2])
        self.viewer.add(epoch, w, a)


def log_stats_table(trainer, s: dict, step: int, roles: np.ndarray | None = None) -> None:
    """One table row per head, its role beside its scores (wandb's Table: sorted and filtered in the UI)."""
    names = list(s)
    L, H = s[names[0]].shape
    rows = [[step, layer, head, *([str(roles[layer, head])] if roles is not None else []),
             *(float(s[k][layer, head]) for k in names)] for layer in range(L) for head in range(H)]
    columns = ["step", "layer", "head", *(["role"] if roles is not None else []), *names]
    log_table(trainer.loggers, "attention_head_stats", columns, rows, step)
