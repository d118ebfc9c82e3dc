"""What a user sees: maps that show structure on diffuse real-text attention, the block a run
ends with, epoch lines instead of bar redraws in a log, TensorBoard's HPARAMS tab and step-aligned
images, the full config in wandb, early stopping recorded, and the toy agreement task."""

from __future__ import annotations

import numpy as np

from attnexp.maps import render
from attnexp.maps.view import fit

QUICK = ["trainer.enable_progress_bar=false", "data.n_sentences=400", "trainer.max_epochs=2", "maps.n_examples=2"]


def diffuse(T: int = 300, seed: int = 0) -> np.ndarray:
    """What a 20 Newsgroups head looks like: weights around 1/T with a faint band and a faint sink."""
    rng = np.random.default_rng(seed)
    i = np.arange(T)
    logits = rng.normal(0, 0.1, (1, 2, T, T)) + 0.8 * np.exp(-((i[:, None] - i[None, :] - 1) ** 2) / 8)
    logits[..., 0] += 0.8
    w = np.exp(logits) * np.tril(np.ones((T, T)))
    return w / w.sum(-1, keepdims=True)


def heat_pixels(img):
    """The pixels of the first head's map in a grid image."""
    _, _, x0, y0, side = img.info["maps"][0]
    return np.asarray(img.convert("RGB"))[y0:y0 + side, x0:x0 + side].reshape(-1, 3)


def test_a_diffuse_map_is_not_flat():
    w, tokens = diffuse(), [f"t{i}" for i in range(300)]
    assert w[..., 50:, :].max() < 0.06  # past the first queries every weight is small
    img = render.grid(w, tokens, "diffuse", 64)
    side = img.info["maps"][0][4]
    rows = np.tril(np.ones((side, side), bool))  # the causal part of the map, below its first 50 queries' blocks
    rows[: side * 50 // 300] = False
    assert heat_pixels(img)[rows.reshape(-1)].std(0).max() > 25, "the default scale shows no structure"
    linear = heat_pixels(render.grid(w, tokens, "diffuse", 64, scale="linear"))
    assert linear[rows.reshape(-1)].std(0).max() < 10, "on the old fixed 0..1 scale the same map is one colour"


def test_long_sequences_become_blocks_of_mean_weight_per_token():
    w, tokens = diffuse(130), [f"t{i}" for i in range(130)]
    pooled, labels, note = fit(w[0], tokens, 64)
    assert note == "130 tokens in 44 blocks of 3 (mean weight per token)" and len(labels) == 44 and labels[1] == "t3…"
    real = np.array([3] * 43 + [1])  # 130 = 43 x 3 + 1: the last block holds one token
    np.testing.assert_allclose((pooled * real).sum(-1), 1.0, atol=1e-6)  # times the block size: the rows' mass


def test_a_partial_last_block_is_not_darker():
    """A uniform map stays uniform when pooled, the partial last block included (it held fewer keys,
    and summing them drew it as a false dark column)."""
    n = 101
    w = np.full((1, n, n), 1.0 / n)
    pooled, _, note = fit(w, [str(i) for i in range(n)], 64)
    assert "51 blocks of 2" in note
    np.testing.assert_allclose(pooled, 1.0 / n, rtol=1e-9)
