"""attnexp from Python (a notebook, a script, a test): the same composition, validation, training
and maps as the command line.

    from attnexp.api import compose, load_run, train

    run = load_run(compose(["attention=alibi", "trainer.max_epochs=2"], "outputs/notebook"))  # typed, checked
    summary = train(run)  # writes outputs/notebook/
"""

from __future__ import annotations

from pathlib import Path

from attnexp.config import MapsConfig
from attnexp.launch.compose import compose
from attnexp.launch.load import load_run

__all__ = ["compose", "load_run", "train", "draw_maps"]


def train(run, callbacks=()):
    """Train one validated run (`load_run(compose(...))`); returns its summary (attnexp.training.fit)."""
    from attnexp.training.fit import train as fit

    return fit(run, callbacks)


def draw_maps(*, ckpt: str | None = None, hf: str | None = None, texts: list[str], text_pairs: list[str] | None = None,
              out: str | None = None, view: MapsConfig | None = None, bertviz: bool = False) -> tuple[Path, int]:
    """The attention maps of `texts` through a trained checkpoint (`ckpt=`) or a pretrained BERT /
    GPT-2 (`hf=`, with `text_pairs` for sentence pairs), saved in `out` (default: beside the
    checkpoint, or ./maps/hf_<name>); returns (the folder, the number of texts)."""
    from attnexp.maps import draw

    view = view or MapsConfig()
    if bertviz:
        from attnexp.maps import bertviz_export

        bertviz_export.require()
    src = maps_source_pretrained(hf, texts, text_pairs or []) if hf else maps_source_checkpoint(ckpt, texts)
    folder = draw.out_folder(out, src.default_out)
    draw.draw(src, folder, view, bertviz=bertviz, pretrained=bool(hf))
    return folder, len(src.probe.ids)


def maps_source_checkpoint(ckpt: str, texts: list[str]):
    """A trained checkpoint, read as data (its model rebuilt without Lightning), and its own
    tokenizer for the texts."""
    import sys

    from attnexp.data.encoder import TextEncoder
    from attnexp.maps.draw import Source
    from attnexp.maps.probe import Probe
    from attnexp.model import checkpoints

    path = Path(ckpt)
    data = checkpoints.load(path, "ckpt")
    enc = TextEncoder.from_checkpoint(data, "ckpt", path)
    model, _ = checkpoints.model_from_checkpoint(data, path)
    ids = [enc.encode(t)[: model.m.max_len] for t in texts]
    if max(max(x, default=0) for x in ids) >= model.tok_emb.num_embeddings:
        from attnexp.config import ConfigError

        raise ConfigError(f"ckpt={str(path)!r}: its tokenizer gives ids beyond its model's vocabulary; the two do not "
                          f"belong together")
    for t in texts:
        unknown = enc.unknown_words(t)
        if unknown:
            print(f"attnexp maps: {len(unknown)} word(s) of {t[:40]!r} are not in the vocabulary and became [UNK]: "
                  f"{', '.join(unknown[:10])}{' ...' if len(unknown) > 10 else ''}", file=sys.stderr)
    return Source(model, Probe(ids, [enc.decode(x) for x in ids]), enc.pad_id, path.name,
                  int(data.get("epoch", 0)), path.parent.parent / "maps" / f"custom_{path.stem}",
                  first_word_id=enc.first_word_id)


def maps_source_pretrained(source: str, texts: list[str], text_pairs: list[str]):
    """Weights through transformers (attnexp.model.pretrained), the tokenizer through tokenizers:
    a BERT pair gets its token types."""
    from attnexp import attention
    from attnexp.config import AttentionConfig, ModelConfig
    from attnexp.maps.draw import Source
    from attnexp.maps.probe import Probe
    from attnexp.model import Transformer, pretrained

    m, a = pretrained.configs(source, ModelConfig(), AttentionConfig(backend="eager"))
    model = Transformer(m, attention.validate(a, m), pretrained.hf_config(source).vocab_size)
    pretrained.load_into(model, source)
    tok = pretrained.tokenizer(source, m.max_len)
    encs = [tok.encode(t, p) for t, p in zip(texts, text_pairs or [None] * len(texts))]
    types = [e.type_ids for e in encs] if m.type_vocab_size else None
    probe = Probe([e.ids for e in encs], [e.tokens for e in encs], types=types)
    name = Path(source).name or source.replace("/", "_")
    # GPT-2's one special token is its last id: random tokens for the induction probe start at 0
    return Source(model.eval(), probe, tok.token_to_id("[PAD]") or 0, name, 0, Path("maps") / f"hf_{name}",
                  first_word_id=0 if model.a.causal else None)
