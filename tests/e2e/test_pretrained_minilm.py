"""The real pretrained encoder in ../shared/models/all-MiniLM-L6-v2 (a BertModel: 6 layers, 12
heads, d=384; its tokenizer.json pads every text to 128), end to end: `attnexp maps hf=` on it
draws only the real tokens, with weights equal to transformers' own, in pages of sane size.
Skipped where the model is absent."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers.runs import SHARED

MODEL = SHARED / "models" / "all-MiniLM-L6-v2"
pytestmark = pytest.mark.skipif(not (MODEL / "config.json").is_file(), reason=f"needs the pretrained model in {MODEL}")
TEXT, PAIR = "The keys to the cabinet are on the table.", "Where are the keys?"


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    pytest.importorskip("transformers")
    from attnexp.cli.maps import maps_cli

    out = tmp_path_factory.mktemp("minilm") / "maps"
    assert maps_cli([f"hf={MODEL}", f"text={TEXT}", f"text_pair={PAIR}", f"out={out}", "bertviz=true"]) == 0
    return out


def test_its_maps_hold_only_the_real_tokens(drawn):
    with np.load(drawn / "maps.npz") as z:
        tokens, w = list(z["tokens"][0]), z["weights"]
    assert tokens == ["[CLS]", "the", "keys", "to", "the", "cabinet", "are", "on", "the", "table", ".", "[SEP]",
                      "where", "are", "the", "keys", "?", "[SEP]"]
    assert w.shape == (6, 1, 12, 18, 18)


def test_its_weights_are_transformers_own(drawn):
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(MODEL)
    enc = tok(TEXT, PAIR, return_tensors="pt")
    model = AutoModel.from_pretrained(MODEL, attn_implementation="eager").eval()
    with torch.no_grad():
        theirs = torch.stack(model(**enc, output_attentions=True).attentions)[:, 0].numpy()  # (L, H, T, T)
    with np.load(drawn / "maps.npz") as z:
        ours = z["weights"][:, 0].astype(np.float32)  # saved as float16
    np.testing.assert_allclose(ours, theirs, atol=1e-3, rtol=0)  # float16's rounding of weights in [0, 1]


def test_its_bertviz_pages_are_a_few_megabytes(drawn):
    sizes = {p.name: p.stat().st_size for p in drawn.glob("bertviz_*.html")}
    assert len(sizes) == 2 and all(s < 4_000_000 for s in sizes.values()), sizes


def test_its_previous_and_next_token_heads_are_found():
    """BERT-family encoders have heads that attend to the previous / next token (Clark et al. 2019);
    attnexp's role scores find this model's: L0H2 (previous, ~1.0) and L1H8 (next, ~0.7), the same
    two that scripts/studies/minilm_heads.py finds on 300 20 Newsgroups sentences."""
    pytest.importorskip("transformers")
    from attnexp.api import maps_source_pretrained
    from attnexp.heads import roles
    from attnexp.heads.probe import attention_maps

    texts = ["The keys to the cabinet are on the table.", "I have been running Linux on my laptop for two years.",
             "Does anyone know where to find the drivers for this card?", "The game went into overtime after a late goal.",
             "Thanks in advance for any help you can give me.", "The launch was delayed because of the weather."]
    src = maps_source_pretrained(str(MODEL), texts, [])
    w = attention_maps(src.model, src.probe, src.pad_id)
    scores = roles.pattern_scores(w, src.probe.lengths, src.probe.tokens, causal=False)
    assigned = roles.assign(scores)
    assert [(int(a), int(b)) for a, b in zip(*np.nonzero(assigned == "previous"))] == [(0, 2)]
    assert scores["prev_token"][0, 2] > 0.95
    assert [(int(a), int(b)) for a, b in zip(*np.nonzero(assigned == "next"))] == [(1, 8)]
