"""Attention maps: the probe pass, statistics, the callback's outputs on disk and in the loggers,
the HTML viewer in a real browser, and `attnexp maps`."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnexp import attention
from attnexp.api import load_run, train
from attnexp.config import AttentionConfig, ModelConfig
from attnexp.heads import quantities, stats
from attnexp.model import Transformer
from helpers import browser
from helpers.runs import compose_cfg
from helpers.variants import EXTRA

QUICK = ["trainer.enable_progress_bar=false", "data.n_sentences=400", "trainer.max_epochs=2", "maps.n_examples=2"]


@pytest.mark.parametrize("name", list(attention.registered()))
def test_probe_path_gives_the_same_outputs_as_the_training_path(name):
    """Training may run on SDPA/flash/flex; the probe takes the eager path of the same modules."""
    c = attention.get(name)
    fast = [b for b in c.backends if b != "eager"][0] if len(c.backends) > 1 else "eager"
    extra = EXTRA.get(name, {})
    torch.manual_seed(0)
    model = Transformer(ModelConfig(d_model=32, n_heads=4), AttentionConfig(name=name, backend=fast, **extra), 40).eval()
    ids = torch.randint(6, 40, (3, 11))
    pad = torch.arange(11)[None] < torch.tensor([11, 8, 5])[:, None]
    with torch.no_grad():
        fast_out = model(ids, pad).logits
        probe_out = model(ids, pad, need_weights=True)
    torch.testing.assert_close(probe_out.logits[pad], fast_out[pad], atol=1e-5, rtol=1e-5)
    assert len(probe_out.attn) == 2 and probe_out.attn[0].shape[-1] == 11


def test_statistics_on_known_maps():
    T, lengths = 4, [4, 3]
    uniform = np.zeros((1, 2, 2, T, T))
    for b, n in enumerate(lengths):
        uniform[0, b, :, :n, :n] = 1.0 / n
    s = quantities.measure(quantities.Maps(uniform, lengths))
    want_entropy = (4 * np.log(4) + 3 * np.log(3)) / 7  # mean over the 7 real query rows
    np.testing.assert_allclose(s["entropy"], want_entropy, rtol=1e-6)
    np.testing.assert_allclose(s["head_diversity"], 0, atol=1e-9)  # identical heads
    first = np.zeros((1, 1, 2, T, T))
    first[..., 0] = 1.0  # every query on the first token
    s = quantities.measure(quantities.Maps(first, [T]))
    np.testing.assert_allclose(s["first_token"], 1.0)
    np.testing.assert_allclose(s["distance"], np.mean(np.arange(T)))
    prev = np.zeros((1, 1, 2, T, T))
    prev[0, 0, 0] = np.eye(T)  # head 0: itself; head 1: the first token
    prev[0, 0, 1, :, 0] = 1.0
    assert quantities.measure(quantities.Maps(prev, [T]))["head_diversity"][0, 0] > 0.3
    assert stats.alignment(prev, [[(2, 2), (3, 3)]])[0].tolist() == [1.0, 0.0]


def test_drift_is_the_js_divergence_of_rows_from_the_start():
    T = 4
    causal = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    diag = np.eye(T)
    w0 = np.stack([causal, diag])[None, None]  # (L=1, B=1, H=2, T, T)
    assert np.allclose(stats.drift(w0, w0, [T]), 0)
    moved = np.stack([causal, np.roll(diag, 1, axis=1)])[None, None]  # head 1 now looks one key further right
    d = stats.drift(moved, w0, [T])
    assert d[0, 0] == 0 and np.isclose(d[0, 1], np.log(2))  # rows that share no key: ln 2


def test_callback_writes_maps_and_logs_them(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    cfg = compose_cfg([*QUICK, "logger=tensorboard", "maps.importance=true"], tmp_path)
    s = train(load_run(cfg))
    maps = tmp_path / "maps"
    for epoch in range(2):
        d = np.load(maps / f"epoch{epoch:03d}.npz", allow_pickle=False)  # plain arrays: safe to load from anyone
        L, B, H = d["weights"].shape[:3]
        assert (L, B, H) == (2, 2, 4) and d["tokens"].shape == (2, d["weights"].shape[-1])
        assert d["tokens"][0][d["lengths"][0] - 1] == "[EOS]" and (d["tokens"][0][d["lengths"][0]:] == "").all()
        assert d["tokens"][0][0] == "[BOS]" and d["stat_entropy"].shape == (2, 4)
        assert (maps / f"epoch{epoch:03d}_ex1.png").is_file()
    assert (maps / "evolution_ex0.gif").is_file() and (maps / "viewer.html").is_file()
    from PIL import Image

    assert Image.open(maps / "evolution_ex0.gif").n_frames == 3  # the start snapshot, then 2 epochs
    ev = EventAccumulator(str(tmp_path / "tensorboard"), size_guidance={"images": 0, "scalars": 0, "histograms": 0}).Reload()
    assert "attention_maps/example0" in ev.Tags()["images"]
    # the start's at step 0, then on the steps of the epochs' validation metrics (Lightning's logging step:
    # one less than global_step)
    assert [e.step for e in ev.Images("attention_maps/example0")] == [0, *(e.step for e in ev.Scalars("val/loss"))]
    assert [e.step for e in ev.Scalars("val/loss")] == [s["metrics"]["history"][i]["step"] - 1 for i in range(2)]
    for tag in ("attn/L0/entropy", "attn/L1/distance", "attn/L0/first_token", "attn/L1/head_diversity",
                "attn/L1/drift", "attn/L0/prev_token", "attn/L1/induction", "attn/L0/importance",
                "attn/L1/layer_importance", "attn/heads_90", "attn/induction_best"):
        assert tag in ev.Tags()["scalars"], tag
    # every head's value per statistic as one histogram an epoch; per-head scalars only when asked
    assert not [t for t in ev.Tags()["scalars"] if t.startswith("attn/L0H")]
    assert {"heads/entropy", "heads/importance", "heads/induction"} <= set(ev.Tags()["histograms"])
    assert len(ev.Histograms("heads/entropy")) == 2
    # the Custom Scalars tab groups the charts: every chart it lays out has a line (a logged scalar)
    from tensorboard.plugins.custom_scalar import layout_pb2

    layout = layout_pb2.Layout.FromString(ev.Tensors("custom_scalars__config__")[0].tensor_proto.string_val[0])
    charts = {c.title: c.multiline.tag[0] for cat in layout.category for c in cat.chart}
    assert {"loss", "row entropy (nats)", "change since training started (JS)", "layer importance (loss increase, "
            "layer silenced)", "share on the previous token"} <= set(charts)
    import re

    assert all(any(re.match(rx, t) for t in ev.Tags()["scalars"]) for rx in charts.values()), charts
    assert "best alignment" not in charts  # the toy corpus has no alignment targets: no empty chart
    assert len(ev.Images("head_importance")) == 3 and (maps / "epoch001_importance.png").is_file()  # start + 2 epochs
    assert len(ev.Images("head_roles")) == 3 and (maps / "epoch001_roles.png").is_file() and (maps / "start_roles.png").is_file()
    last = np.load(maps / "epoch001.npz", allow_pickle=False)
    assert last["roles"].shape == (2, 4) and last["stat_importance"].shape == (2, 4) and "rollout_ex1" in last
    assert last["rollout_ex1"].shape == (last["lengths"][1],) * 2
    # the start snapshot (before the first step) is what each epoch's drift is measured from
    start = np.load(maps / "start.npz", allow_pickle=False)
    assert int(start["epoch"]) == -1 and "stat_drift" not in start
    drift = [np.load(maps / f"epoch{e:03d}.npz")["stat_drift"] for e in range(2)]
    assert (drift[0] > 0).all() and drift[1].mean() > drift[0].mean()  # training moves the maps, further in time


def test_maps_from_given_texts_and_the_maps_command(tmp_path, capsys):
    texts = '["the dogs near the cat run .","a king sleeps"]'
    cfg = compose_cfg([*QUICK, "logger=none", f"maps.texts={texts}", "trainer.max_epochs=1"], tmp_path)
    s = train(load_run(cfg))
    d = np.load(tmp_path / "maps" / "epoch000.npz", allow_pickle=False)
    assert list(d["tokens"][1][: d["lengths"][1]]) == ["[BOS]", "a", "king", "sleeps", "[EOS]"]
    from attnexp.cli import main

    out = tmp_path / "custom"
    assert main(["maps", f"ckpt={s['checkpoints']['last']}", "text=every cat sings .", f"out={out}"]) == 0
    m = np.load(out / "maps.npz", allow_pickle=False)
    assert list(m["tokens"][0]) == ["[BOS]", "every", "cat", "sings", ".", "[EOS]"]
    assert m["weights"].shape == (2, 1, 4, 6, 6) and (out / "maps_ex0.png").is_file() and (out / "viewer.html").is_file()
    assert main(["maps", "ckpt=/nope.ckpt", "text=x"]) == 2
    assert "no such checkpoint file" in capsys.readouterr().err


def test_wandb_offline_gets_images_and_a_table(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_MODE", "offline")
    cfg = compose_cfg([*QUICK, "logger=wandb", "trainer.max_epochs=1"], tmp_path)
    train(load_run(cfg))
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    root = runs[0] / "files" / "media"
    media = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()]
    # the start (before training) and the one epoch: before, only the epoch's reached wandb
    assert sum(n.startswith("images/attention_maps/example0") and n.endswith(".png") for n in media) == 2, media
    tables = [p for p in root.rglob("*.table.json") if "attention_head_stats" in p.name]
    assert tables, media
    import json

    table = json.loads(tables[0].read_text())
    assert table["columns"][:4] == ["step", "layer", "head", "role"] and "prev_token" in table["columns"]


def test_a_classifier_run_logs_each_tokens_relevance_to_its_classes(tmp_path):
    cfg = compose_cfg([*QUICK, "logger=none", "task=classify", "trainer.max_epochs=1"], tmp_path)
    train(load_run(cfg))
    d = np.load(tmp_path / "maps" / "epoch000.npz", allow_pickle=False)
    for b in range(2):
        n = d["lengths"][b]
        assert d[f"relevance_pred_scores_ex{b}"].shape == (n,) and d[f"relevance_true_scores_ex{b}"].shape == (n,)
        assert int(d[f"relevance_pred_ex{b}"][0]) in (0, 1) and np.isfinite(d[f"relevance_pred_scores_ex{b}"]).all()
    page = (tmp_path / "maps" / "viewer.html").read_text()
    assert '"singular"' in page and '"plural"' in page  # the class names the viewer shows


@browser.needs_chromium
def test_viewer_renders_in_headless_chromium(tmp_path):
    from attnexp.maps.html import write_viewer

    w = np.zeros((2, 1, 2, 5, 5), dtype=np.float32)
    w[..., np.arange(5), np.arange(5)] = 1.0
    write_viewer(tmp_path / "viewer.html", [(0, w), (1, w)], [["[BOS]", "a", "b", "c", "[EOS]"]], 64, title="t")
    url, profile = (tmp_path / "viewer.html").as_uri(), tmp_path / "chromium"
    dom = browser.open_page(url, "--dump-dom", profile)
    assert 'data-rendered="yes"' in dom and "5 tokens" in dom, dom[-500:]
    shot = tmp_path / "shot.png"
    browser.open_page(url, f"--screenshot={shot}", profile)
    from PIL import Image

    px = np.asarray(Image.open(shot).convert("RGB")).reshape(-1, 3)
    yellow = ((px[:, 0] > 200) & (px[:, 1] > 200) & (px[:, 2] < 90)).sum()  # viridis(1.0): the diagonal
    purple = ((px[:, 0] < 90) & (px[:, 1] < 30) & (px[:, 2] > 60)).sum()  # viridis(0.0): the rest
    assert yellow > 500 and purple > 2000, (yellow, purple)


def test_the_probe_leaves_a_frozen_encoder_in_eval_mode():
    """A frozen encoder trains without dropout (AttnexpModule.train keeps it in eval mode); the map
    probe used to end with `model.train(True)`, which switched it back on for the rest of the run
    (failed before eval_mode restored each submodule's own mode)."""
    from attnexp.config import OptimConfig, TaskConfig
    from attnexp.heads.probe import Probe, attention_maps
    from attnexp.training.module import AttnexpModule

    m = AttnexpModule.from_configs(ModelConfig(n_layers=1, d_model=16, n_heads=2, max_len=8, dropout=0.1),
                                   AttentionConfig(name="mha", mask="bidirectional"), TaskConfig(name="classify"),
                                   OptimConfig(freeze_encoder=True), vocab_size=11, num_classes=3)
    m.train()
    before = {n: x.training for n, x in m.model.named_modules()}
    assert before["head"] and not before["blocks"]
    attention_maps(m.model, Probe([[1, 2, 3]], [["a", "b", "c"]]), pad_id=0)
    assert {n: x.training for n, x in m.model.named_modules()} == before


@pytest.mark.slow
def test_a_gpt2_shaped_run_writes_a_few_hundred_scalar_tags_not_thousands(tmp_path):
    """At model=gpt2's shape (12 layers x 12 heads) per-head scalars were ~21 a head: about 3,000
    TensorBoard charts and wandb metrics. By default a run now writes per-layer means and one
    histogram a statistic; maps.head_scalars=true brings the per-head charts back. (Two steps rather
    than fast_dev_run, which turns the loggers off.)"""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from attnexp.api import train
    from helpers.runs import run_of

    s = train(run_of(["model=gpt2", "trainer.max_epochs=1", "trainer.limit_train_batches=2", "trainer.limit_val_batches=1",
                      "test=false", "data.n_sentences=200", "logger=tensorboard", "data.batch_size=8",
                      "maps.n_examples=1", "data.max_len=32", "model.max_len=32"], tmp_path))
    assert s["status"] == "completed"
    ev = EventAccumulator(str(tmp_path / "tensorboard"), size_guidance={"scalars": 0, "histograms": 0}).Reload()
    tags = ev.Tags()["scalars"]
    assert 50 < len(tags) <= 300, len(tags)
    assert "attn/L11/entropy" in tags and "heads/entropy" in ev.Tags()["histograms"]


def test_a_full_disk_leaves_no_half_viewer(tmp_path, monkeypatch):
    """Issue 52: a disk that filled while viewer.html was written left a 0-byte viewer.html (it was written
    with Path.write_text, not whole-or-nothing). Every write here fails as a full disk does, after the
    file is created: the viewer is absent afterwards, not empty."""
    import errno
    import pathlib

    from attnexp.maps.html import write_viewer

    def full(self, *args, **kwargs):
        open(self, "wb").close()  # the file is made, then the disk has no room for its bytes
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pathlib.Path, "write_text", full)
    monkeypatch.setattr(pathlib.Path, "write_bytes", full)
    w = np.zeros((2, 1, 2, 5, 5), dtype=np.float32)
    w[..., np.arange(5), np.arange(5)] = 1.0
    with pytest.raises(OSError):
        write_viewer(tmp_path / "viewer.html", [(0, w)], [["[BOS]", "a", "b", "c", "[EOS]"]], 64, title="t")
    assert not (tmp_path / "viewer.html").exists() and not list(tmp_path.iterdir())


def test_the_dashboard_gets_the_formations_and_the_curves_of_the_heads_that_formed(tmp_path):
    """Issue 53: TensorBoard had, per reading, only the in-context score and counts of heads per role,
    and a heads_timeline image without outlines. Now, at the end, the picture with the formations
    outlined at the last step, and one curve for each head that formed (by the score it formed by);
    no other per-head tags."""
    pytest.importorskip("tensorboard")
    pytest.importorskip("ruptures", reason="change points need ruptures: pip install 'attnexp[timeline]'")
    from pathlib import Path

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from attnexp.api import train
    from helpers.runs import run_of

    data = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "20newsgroups"
    if not data.is_dir():
        pytest.skip(f"the shared 20 Newsgroups copy is absent ({data})")
    s = train(run_of(["experiment=induction_text", f"data.path={data}", "data.limit=200", "trainer.max_steps=120",
                      "maps.every_n_steps=10", "trainer.val_check_interval=60", "logger=tensorboard", "test=false",
                      f"paths.cache_dir={tmp_path}"],
                     tmp_path))
    formed = s["attention_maps"]["timeline"]["formations"]
    assert formed, "the preset's first 120 steps form local heads (L1 at step ~50)"
    ev = EventAccumulator(str(tmp_path / "tensorboard"), size_guidance={"images": 0, "scalars": 0}).Reload()
    curves = {t for t in ev.Tags()["scalars"] if t.startswith("timeline/L")}
    assert curves == {f"timeline/L{f['layer']}H{f['head']}/{f['quantity']}" for f in formed}
    readings = s["attention_maps"]["timeline"]["readings"]
    assert all(len(ev.Scalars(t)) == readings - 1 for t in curves)  # every reading but step 0
    last = ev.Images("heads_timeline")[-1]
    assert last.step == s["attention_maps"]["timeline"]["steps"][1]
    from io import BytesIO

    from PIL import Image

    img = np.asarray(Image.open(BytesIO(last.encoded_image_string)).convert("RGB"))
    assert ((img == (214, 39, 40)).all(-1)).sum() > 20  # the red outlines of the formations
