"""A trained checkpoint or a pretrained BERT / GPT-2, loaded once for looking at (what
`attnexp.load` returns): its model, its tokenizer, and for any text the attention maps, the
analysis of the heads, and the viewer inline in a notebook. `attnexp maps` and `attnexp sample`
load through it too."""

from __future__ import annotations

import html
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnexp.config import AttentionConfig, ConfigError, MapsConfig, ModelConfig, layout


@dataclass
class Loaded:
    """model: the plain Transformer in eval mode; encode(text[, pair]) -> (ids, tokens[, types])."""

    model: object
    name: str
    pad_id: int
    first_word_id: int | None
    encoder: object  # attnexp.data.encoder.TextEncoder (a checkpoint) or a tokenizers.Tokenizer (pretrained)
    hparams: dict | None = None  # a checkpoint's hyper_parameters
    path: Path | None = None
    epoch: int = 0
    pretrained: bool = False

    # -- loading ---------------------------------------------------------------------------------
    @classmethod
    def checkpoint(cls, path: str | Path) -> Loaded:
        """A trained attnexp checkpoint, read as data (checkpoints.load), its model rebuilt
        without Lightning and its own tokenizer."""
        from attnexp.data.encoder import TextEncoder
        from attnexp.model import checkpoints

        data = checkpoints.load(path, "ckpt")
        path = Path(path)
        enc = TextEncoder.from_checkpoint(data, "ckpt", path)
        model, hp = checkpoints.model_from_checkpoint(data, path)
        return cls(model, path.name, enc.pad_id, enc.first_word_id, enc, hp, path, int(data.get("epoch", 0)))

    @classmethod
    def pretrained_model(cls, source: str) -> Loaded:
        """A BERT- or GPT-2-family model through transformers (attnexp.model.pretrained), its
        tokenizer through tokenizers."""
        from attnexp import attention
        from attnexp.model import Transformer, pretrained

        m, a = pretrained.configs(source, ModelConfig(), AttentionConfig(backend="eager"))
        model = Transformer(m, attention.validate(a, m), pretrained.hf_config(source).vocab_size)
        pretrained.load_into(model, source)
        tok = pretrained_tokenizer(source, m.max_len)
        name = Path(source).name or source.replace("/", "_")
        # GPT-2's one special token is its last id: random tokens for the induction probe start at 0
        return cls(model.eval(), name, tok.token_to_id("[PAD]") or 0, 0 if model.causal else None, tok,
                   pretrained=True)

    @classmethod
    def of(cls, spec: str | Path) -> Loaded:
        """`hf:<hub name or folder>` or a checkpoint path."""
        s = str(spec)
        return cls.pretrained_model(s[3:]) if s.startswith("hf:") else cls.checkpoint(s)

    # -- text -------------------------------------------------------------------------------------
    def probe(self, texts: list[str], pairs: list[str] | None = None, say_unknown: bool = True):
        """The texts as a Probe (ids cut to the model's max_len; a BERT pair gets its token types)."""
        from attnexp.heads.probe import Probe

        texts = [texts] if isinstance(texts, str) else list(texts)
        if not texts:
            raise ConfigError("give at least one text, e.g. .show(\"the dog runs .\") or .scores(\"the dog runs .\")")
        if self.pretrained:
            encs = [self.encoder.encode(t, p) for t, p in zip(texts, pairs or [None] * len(texts))]
            types = [e.type_ids for e in encs] if self.model.type_vocab_size else None
            return Probe([e.ids for e in encs], [e.tokens for e in encs], types=types)
        if pairs:
            raise ConfigError("text pairs go with a pretrained BERT (hf:...); a checkpoint takes single texts")
        ids = [self.encoder.encode(t)[: self.model.max_len] for t in texts]
        if max(max(x, default=0) for x in ids) >= self.model.tok_emb.num_embeddings:
            raise ConfigError(f"ckpt={str(self.path)!r}: its tokenizer gives ids beyond its model's vocabulary; the two "
                              f"do not belong together")
        for t in texts if say_unknown else ():
            unknown = self.encoder.unknown_words(t)
            if unknown:
                print(f"attnexp maps: {len(unknown)} word(s) of {t[:40]!r} are not in the vocabulary and became [UNK]: "
                      f"{', '.join(unknown[:10])}{' ...' if len(unknown) > 10 else ''}", file=sys.stderr)
        return Probe(ids, [self.encoder.decode(x) for x in ids])

    def source(self, texts: list[str], pairs: list[str] | None = None):
        """What `attnexp maps` draws (attnexp.maps.draw.Source): these texts through this model."""
        from attnexp.maps.draw import Source

        probe = self.probe(texts, pairs)
        if self.pretrained:
            return Source(self.model, probe, self.pad_id, self.name, 0, Path(layout.MAPS) / f"hf_{self.name}",
                          first_word_id=self.first_word_id)
        return Source(self.model, probe, self.pad_id, self.name, self.epoch,
                      self.path.parent.parent / layout.MAPS / f"custom_{self.path.stem}", first_word_id=self.first_word_id)

    def attention(self, text: str, pair: str | None = None) -> tuple[list[str], np.ndarray]:
        """(tokens, weights (layers, heads, T, T)): the post-softmax maps the model applies to V,
        through the same weight-returning path a training run's snapshots use."""
        from attnexp.heads.probe import attention_maps

        probe = self.probe([text], [pair] if pair else None, say_unknown=False)
        return probe.tokens[0], attention_maps(self.model, probe, self.pad_id)[:, 0]

    def analysis(self, text: str, view: MapsConfig | None = None):
        """The reading of the heads on `text` (attnexp.heads.analysis.read_heads, as a training run's
        snapshots and `attnexp maps` take it): every per-head quantity, roles, rollout, and for a
        classifier the relevance of each token."""
        return self._reading([text], view or MapsConfig())[1]

    def _reading(self, texts: list[str], view: MapsConfig):
        """(probe, reading, maps (L, B, H, T, T)) of `texts`."""
        from attnexp.heads.analysis import context_of, read_heads
        from attnexp.heads.probe import attention_maps

        probe = self.probe(texts, say_unknown=False)
        w = attention_maps(self.model, probe, self.pad_id)
        return probe, read_heads(self.model, probe, w, self.pad_id, view, context_of(self.model, probe, self.first_word_id)), w

    def scores(self, text: str) -> dict:
        """{quantity: (layers, heads)} for every per-head quantity a training run's viewer shows (the
        maps' statistics, pattern and induction scores), `roles` (layers, heads), `rollout` (T, T)
        and, for a classifier, `relevance` (the predicted class and each token's relevance to it)."""
        a = self.analysis(text)
        out: dict = dict(a.scores)
        if a.roles is not None:
            out["roles"] = a.roles
        if a.rollout:
            out["rollout"] = a.rollout[0]
        if a.relevance:
            out["relevance"] = {"predicted": a.relevance[0]["pred"], "tokens": a.relevance[0]["pred_scores"]}
        return out

    def viewer_html(self, texts: list[str], view: MapsConfig | None = None) -> str:
        """attnexp's viewer of `texts` as one self-contained page (no network)."""
        import tempfile

        from attnexp.maps.html import write_viewer

        view = view or MapsConfig()
        probe, a, w = self._reading(texts, view)
        with tempfile.TemporaryDirectory() as d:
            page = Path(d) / layout.VIEWER
            write_viewer(page, [(self.epoch, w, a)], probe.tokens, view.viewer_tokens, title=self.name, long=view.long,
                         scale=view.scale)
            return page.read_text(encoding="utf-8")

    def show(self, *texts: str, height: int = 720) -> Inline:
        """The viewer of `texts`, shown inline in Jupyter (an iframe holding the whole page)."""
        return Inline(self.viewer_html(list(texts)), height)


@dataclass
class Inline:
    """A page Jupyter shows inline (its `_repr_html_`): an iframe whose srcdoc is the page, escaped
    for an attribute, so the page's scripts run in their own document and touch nothing else."""

    page: str
    height: int = 720

    def _repr_html_(self) -> str:
        return (f'<iframe srcdoc="{html.escape(self.page, quote=True)}" style="width:100%;height:{int(self.height)}px;'
                f'border:0" sandbox="allow-scripts"></iframe>')


def pretrained_tokenizer(source: str, max_len: int):
    """The checkpoint's tokenizer, as attnexp uses it: without the padding and truncation its file
    may carry (sentence-transformers checkpoints pad every text to a fixed 128: those would be
    drawn and counted as real tokens), truncated at the model's `max_len` instead. Its
    post-processor (BERT's [CLS] A [SEP] B [SEP] with token types) stays."""
    from attnexp.data.tokenizer import read_tokenizer
    from attnexp.model.pretrained import hf_config, tokenizer_of

    spec = tokenizer_of(source)
    tok = read_tokenizer(spec, f"hf:{source}")
    vocab = hf_config(source).vocab_size
    if tok.get_vocab_size() > vocab:
        raise ConfigError(f"hf:{source}: its tokenizer has {tok.get_vocab_size():,} tokens but the model's embedding "
                          f"{vocab:,}; the two do not belong together")
    tok.no_padding()
    tok.enable_truncation(max_len)
    return tok
