"""Pretrained BERT and GPT-2 weights in attnexp's Transformer: the same hidden states and the same
attention weights in every layer as Hugging Face's own models (fp32, 1e-5), with and without
padding; tiny models built locally (tests/hf_tiny.py), nothing downloaded."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")

from attnexp.config import AttentionConfig, ConfigError, ModelConfig  # noqa: E402
from attnexp.model import Transformer  # noqa: E402
from attnexp.model import pretrained as hf  # noqa: E402
from helpers import browser
from helpers.hf_tiny import tiny_bert, tiny_gpt2  # noqa: E402
from helpers.runs import SHARED

close = dict(atol=1e-5, rtol=1e-5)


@pytest.fixture(scope="session")
def bert_dir(tmp_path_factory):
    return tiny_bert(tmp_path_factory.mktemp("hf") / "bert")


@pytest.fixture(scope="session")
def gpt2_dir(tmp_path_factory):
    return tiny_gpt2(tmp_path_factory.mktemp("hf") / "gpt2")


def ours(path, backend="sdpa"):
    m, a = hf.configs(str(path), ModelConfig(), AttentionConfig(backend=backend))
    vocab = hf.hf_config(str(path)).vocab_size
    model = Transformer(m, a, vocab)
    hf.load_into(model, str(path))
    return model.eval()


def theirs(path):
    from transformers import AutoModel

    return AutoModel.from_pretrained(path, attn_implementation="eager").eval()


def batch(vocab, padded):
    torch.manual_seed(1)
    ids = torch.randint(5, vocab, (3, 20))
    mask = torch.ones(3, 20, dtype=torch.bool)
    if padded:
        mask[1, 13:] = False
        mask[2, 6:] = False
        ids[~mask] = 0
    return ids, mask


@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("kind", ["bert", "gpt2"])
@pytest.mark.parametrize("backend", ["eager", "sdpa"])
def test_import_gives_the_same_hidden_states_and_attention(kind, padded, backend, bert_dir, gpt2_dir):
    path = bert_dir if kind == "bert" else gpt2_dir
    model, ref = ours(path, backend), theirs(path)
    ids, mask = batch(ref.config.vocab_size, padded)
    types = torch.zeros_like(ids)
    if kind == "bert":
        types[:, 10:] = 1  # a sentence pair: segment B from position 10
    with torch.no_grad():
        kw = {"token_type_ids": types} if kind == "bert" else {}
        r = ref(input_ids=ids, attention_mask=mask.long(), output_attentions=True, **kw)
        fast = model(ids, mask if padded else None, token_type_ids_BT=types if kind == "bert" else None)
        probe = model(ids, mask if padded else None, need_weights=True, token_type_ids_BT=types if kind == "bert" else None)
    # our final hidden state is after ln_f (GPT-2's last_hidden_state is too; BERT's post-norm ends normed)
    torch.testing.assert_close(fast.hidden_BTD[mask], r.last_hidden_state[mask], **close)
    torch.testing.assert_close(probe.hidden_BTD[mask], r.last_hidden_state[mask], **close)
    assert len(probe.attn) == len(r.attentions) == 2
    for w, w_ref in zip(probe.attn, r.attentions):  # every layer, every head, the real query rows
        torch.testing.assert_close(w.transpose(1, 2)[mask], w_ref.transpose(1, 2)[mask], **close)


def test_gpt2_lm_head_is_the_tied_embedding(gpt2_dir):
    from transformers import GPT2LMHeadModel

    model, ref = ours(gpt2_dir), GPT2LMHeadModel.from_pretrained(gpt2_dir).eval()
    ids, _ = batch(ref.config.vocab_size, False)
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, ref(ids).logits, **close)


def test_what_is_not_mapped_is_one_clear_line(tmp_path, bert_dir):
    from transformers import DistilBertConfig, DistilBertModel

    DistilBertModel(DistilBertConfig(vocab_size=50, dim=16, n_layers=1, n_heads=2, hidden_dim=32)).save_pretrained(tmp_path / "d")
    with pytest.raises(ConfigError, match="is a 'distilbert' model; attnexp maps BERT-family encoders"):
        hf.configs(str(tmp_path / "d"), ModelConfig(), AttentionConfig())
    with pytest.raises(ConfigError, match="not attention=alibi"):
        hf.configs(str(bert_dir), ModelConfig(), AttentionConfig(name="alibi"))
    with pytest.raises(ConfigError, match="download it where you are online .* give hf:DIR"):
        hf.configs("no-such-org/no-such-model", ModelConfig(), AttentionConfig())


def test_maps_of_a_pretrained_model_with_a_sentence_pair_and_bertviz(bert_dir, tmp_path, capsys):
    import numpy as np

    from attnexp.cli.maps import maps_cli

    out = tmp_path / "m"
    assert maps_cli([f"hf={bert_dir}", "text=the cat sat on the mat", "text_pair=a dog chased the cat",
                     f"out={out}", "bertviz=true"]) == 0
    names = {p.name for p in out.iterdir()}
    assert {"maps.npz", "maps_ex0.png", "viewer.html", "bertviz_head_view_ex0.html", "bertviz_model_view_ex0.html"} <= names
    with np.load(out / "maps.npz") as z:
        tokens = [t for t in z["tokens"][0] if t]
        assert tokens[0] == "[CLS]" and tokens.count("[SEP]") == 2 and z["weights"].shape[:3] == (2, 1, 4)
        np.testing.assert_allclose(z["stat_row_mass"], 1, atol=1e-3)
    # the maps are the imported model's: the same as Hugging Face's output_attentions on that input
    from transformers import AutoModel, AutoTokenizer

    tok, ref = AutoTokenizer.from_pretrained(bert_dir), AutoModel.from_pretrained(bert_dir, attn_implementation="eager").eval()
    enc = tok("the cat sat on the mat", "a dog chased the cat", return_tensors="pt")
    with torch.no_grad():
        att = ref(**enc, output_attentions=True).attentions
    with np.load(out / "maps.npz") as z:
        np.testing.assert_allclose(z["weights"][1, 0].astype(np.float32), att[1][0].numpy(), atol=1e-3)  # fp16 in the npz
    with pytest.raises(SystemExit):
        maps_cli(["--help"])
    assert maps_cli([f"hf={bert_dir}", f"ckpt={tmp_path}", "text=x"]) == 2
    assert "one of them" in capsys.readouterr().err


@browser.needs_chromium
def test_bertviz_pages_draw_offline_in_headless_chromium(bert_dir, tmp_path):
    from attnexp.cli.maps import maps_cli

    out = tmp_path / "m"
    assert maps_cli([f"hf={bert_dir}", "text=the keys to the cabinet", f"out={out}", "bertviz=true"]) == 0
    for view in ("head", "model"):
        dom = browser.open_page((out / f"bertviz_{view}_view_ex0.html").as_uri(), "--dump-dom", tmp_path / "chromium",
                                wait_ms=5000)
        assert "cdnjs" not in dom.split("<body>")[0]  # nothing fetched from a CDN
        assert "<svg" in dom and "cabinet" in dom.split("<svg", 1)[1], f"bertviz did not draw its {view} view: {dom[-400:]}"


@pytest.mark.skipif(not (SHARED / "data" / "20newsgroups").is_dir(),
                    reason="needs ../shared/data/20newsgroups")
def test_newsgroups_bert_fine_tunes_the_imported_encoder(bert_dir, tmp_path):
    from attnexp.api import load_run, train
    from helpers.runs import compose_cfg

    cfg = compose_cfg(["experiment=newsgroups_bert", f"model.init=hf:{bert_dir}", f"data.path={SHARED / 'data' / '20newsgroups'}",
                       "data.max_len=128", "data.limit=200", "trainer.fast_dev_run=true", "logger=none",
                       "trainer.enable_progress_bar=false", "maps.bertviz=true",
                       f"data.cache_dir={tmp_path / 'cache'}"], tmp_path)
    run = load_run(cfg)
    assert (run.model.norm, run.model.d_model, run.attention.mask) == ("post", 32, "bidirectional")
    assert run.data.tokenizer == str(bert_dir / "tokenizer.json")
    s = train(run)
    assert s["status"] == "completed" and s["steps"] == 1 and s["data"]["vocab_size"] == hf.hf_config(str(bert_dir)).vocab_size
    maps = Path(s["attention_maps"]["dir"])
    assert (maps / "viewer.html").exists() and (maps / "bertviz_head_view_ex0.html").exists()


def with_fixed_padding(src: Path, dst: Path, length: int = 48) -> Path:
    """A copy of a checkpoint whose tokenizer.json pads every text to `length` and truncates there,
    as sentence-transformers checkpoints ship theirs."""
    import json
    import shutil

    shutil.copytree(src, dst)
    spec = json.loads((dst / "tokenizer.json").read_text())
    spec["padding"] = {"strategy": {"Fixed": length}, "direction": "Right", "pad_to_multiple_of": None, "pad_id": 0,
                       "pad_type_id": 0, "pad_token": "[PAD]"}
    spec["truncation"] = {"max_length": length, "strategy": "LongestFirst", "stride": 0, "direction": "Right"}
    (dst / "tokenizer.json").write_text(json.dumps(spec))
    return dst


def test_a_tokenizer_file_with_its_own_padding_draws_only_real_tokens(bert_dir, tmp_path):
    import numpy as np

    from attnexp.cli.maps import maps_cli

    padded = with_fixed_padding(bert_dir, tmp_path / "padded")
    out = tmp_path / "m"
    assert maps_cli([f"hf={padded}", "text=the keys to the cabinet", "text_pair=where are the keys", f"out={out}"]) == 0
    with np.load(tmp_path / "m" / "maps.npz") as z:
        tokens, lengths = list(z["tokens"][0]), z["lengths"]
    assert "[PAD]" not in tokens and lengths[0] == len(tokens) < 48, tokens
    assert tokens[0] == "[CLS]" and tokens.count("[SEP]") == 2


def test_training_with_a_padded_tokenizer_file_pads_only_batches(bert_dir, tmp_path):
    from attnexp.data.tokenizer import get_tokenizer

    padded = with_fixed_padding(bert_dir, tmp_path / "padded")
    tok, _ = get_tokenizer(str(padded / "tokenizer.json"), None, tmp_path, {}, "wordpiece", 100, True, max_len=64)
    lengths = {len(tok.encode(t).ids) for t in ("the cat", "the cat sat", "the cat sat on the mat")}
    assert len(lengths) == 3 and max(lengths) < 48  # each text its own length: the batch collator pads, masked


def test_a_checkpoint_with_only_a_vocab_txt_loads_its_tokenizer(bert_dir, tmp_path, monkeypatch):
    import shutil

    import numpy as np

    from attnexp.cli.maps import maps_cli

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    from tokenizers import Tokenizer

    old = tmp_path / "old_bert"
    shutil.copytree(bert_dir, old)
    vocab = Tokenizer.from_file(str(old / "tokenizer.json")).get_vocab()
    (old / "vocab.txt").write_text("".join(f"{w}\n" for w, _ in sorted(vocab.items(), key=lambda kv: kv[1])))
    (old / "tokenizer.json").unlink()  # what older BERT checkpoints hold: vocab.txt and a config
    for folder, out in ((bert_dir, "new"), (old, "old")):
        assert maps_cli([f"hf={folder}", "text=the keys to the cabinet", f"out={tmp_path / out}"]) == 0
    with np.load(tmp_path / "new" / "maps.npz") as a, np.load(tmp_path / "old" / "maps.npz") as b:
        assert list(a["tokens"][0]) == list(b["tokens"][0])
        np.testing.assert_array_equal(a["weights"], b["weights"])
    assert list((tmp_path / "cache" / "attnexp" / "hf-tokenizers").glob("tokenizer-*.json"))


def test_a_runs_converted_tokenizer_goes_to_its_paths_cache_dir(bert_dir, tmp_path, monkeypatch):
    """model/pretrained.py kept its own ~/.cache/attnexp default and ignored paths.cache_dir: a run
    given paths.cache_dir=DIR (a cluster's scratch, a read-only home) still wrote to the home."""
    import shutil
    from pathlib import Path

    from tokenizers import Tokenizer

    from attnexp.api import compose, load_run

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home_cache"))
    old = tmp_path / "old_bert"
    shutil.copytree(bert_dir, old)
    vocab = Tokenizer.from_file(str(old / "tokenizer.json")).get_vocab()
    (old / "vocab.txt").write_text("".join(f"{w}\n" for w, _ in sorted(vocab.items(), key=lambda kv: kv[1])))
    (old / "tokenizer.json").unlink()
    run = load_run(compose(["experiment=newsgroups_bert", f"model.init=hf:{old}", "data.max_len=64",
                            f"paths.cache_dir={tmp_path / 'scratch'}"]))
    assert Path(run.data.tokenizer).parent == tmp_path / "scratch" / "hf-tokenizers"
    assert not (tmp_path / "home_cache").exists()


# -- a stranger's pretrained folder: data, never code; sizes checked before anything is built ---------

def copy_of(folder, to, **config):
    import json
    import shutil

    shutil.copytree(folder, to)
    c = json.loads((to / "config.json").read_text())
    c.update(config)
    (to / "config.json").write_text(json.dumps(c))
    return to


def test_a_folder_that_asks_to_run_its_own_code_is_refused_at_once_whatever_stdin_holds(bert_dir, tmp_path):
    """Before: transformers asked "Do you wish to run the custom code? [y/N]", waited ~60 s, and on
    `y` ran the folder's Python file."""
    import subprocess
    import sys
    import time

    evil = copy_of(bert_dir, tmp_path / "evil", model_type="evil_bert",
                   auto_map={"AutoConfig": "evil.EvilConfig", "AutoModel": "evil.EvilModel"})
    marker = tmp_path / "ran"
    (evil / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n"
                                  "from transformers import BertConfig as EvilConfig, BertModel as EvilModel\n")
    for command in (["maps", f"hf={evil}", "text=the cat"], ["train", f"model.init=hf:{evil}", "experiment=newsgroups_bert",
                                                             "logger=none", f"hydra.run.dir={tmp_path / 'run'}"]):
        t0 = time.time()
        r = subprocess.run([sys.executable, "-m", "attnexp", *command], input="y\ny\n", capture_output=True, text=True,
                           timeout=120, cwd=tmp_path)
        assert r.returncode == 2 and time.time() - t0 < 30, r.stderr[-2000:]
        assert "asks transformers to run the folder's own Python code (auto_map)" in r.stderr, r.stderr[-2000:]
        assert len(r.stderr.strip().splitlines()) == 1 and not marker.exists()


@pytest.mark.parametrize("config,needle", [
    ({"hidden_size": 1e9}, "hidden_size"),  # transformers' own dataclass check, or ours
    ({"hidden_size": 10**9, "num_attention_heads": 4}, "beyond attnexp's limit"),
    ({"hidden_size": 8192, "num_attention_heads": 64, "intermediate_size": 32768, "num_hidden_layers": 6},
     "parameters but its weight files hold"),
    ({"vocab_size": 10**12}, "config.json's sizes are not whole numbers within attnexp's limits"),
], ids=["float", "beyond-limit", "implied-over-held", "vocab"])
def test_sizes_in_a_pretrained_config_are_checked_before_anything_is_built(bert_dir, tmp_path, config, needle):
    """Before: hidden_size 1e9 tried to allocate 122 TB (a traceback); sizes each within reason built a
    4.8e9-parameter model first (8.6 GB resident)."""
    import resource

    folder = copy_of(bert_dir, tmp_path / "big", **config)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ConfigError, match=needle) as e:
        hf.configs(str(folder), ModelConfig(), AttentionConfig())
    assert "\n" not in str(e.value) and str(e.value).startswith(f"hf:{folder}")
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KiB


def test_a_tokenizer_bigger_than_the_model_or_the_limit_is_one_line(bert_dir, tmp_path):
    import json
    import shutil

    folder = tmp_path / "tok"
    shutil.copytree(bert_dir, folder)
    t = json.loads((folder / "tokenizer.json").read_text())
    t["model"]["vocab"].update({f"extra{i}": 10_000 + i for i in range(5000)})
    (folder / "tokenizer.json").write_text(json.dumps(t))
    from attnexp.notebook.loaded import pretrained_tokenizer

    with pytest.raises(ConfigError, match="its tokenizer has .* tokens but the model's embedding"):
        pretrained_tokenizer(str(folder), 64)
    (folder / "tokenizer.json").write_bytes("{\"version\": \"1.0\", \"x\": \"caf\xe9\"}".encode("latin-1"))
    with pytest.raises(ConfigError, match="is not UTF-8 text"):
        pretrained_tokenizer(str(folder), 64)
