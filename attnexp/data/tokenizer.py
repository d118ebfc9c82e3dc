"""Subword tokenizers from `tokenizers`: trained on the training texts only, cached by settings,
or loaded from a tokenizer.json path / a hub name."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from attnexp.config import ConfigError
from attnexp.config.paths import whole

SUBWORD_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def train_tokenizer(texts, kind: str, vocab_size: int, lowercase: bool) -> Tokenizer:
    """A WordPiece or BPE tokenizer trained on `texts`, the same file for the same texts every time.

    tokenizers' WordPiece trainer is not (huggingface/tokenizers#1794, fix proposed in PR #2066): it
    creates the continuing-subword tokens (`##e`) while iterating over a hash map of word counts, so
    their ids, and through the ids the tie-breaks between equally frequent merges, change from one
    process to the next (three trainings on 20 Newsgroups gave three vocabularies). Here those tokens
    exist before training, in sorted order, so nothing is left to the hash order; they are given to
    the trainer as special tokens (its only way to seed the vocabulary) and made ordinary vocabulary
    entries again afterwards. BPE without a continuing prefix builds only from the sorted alphabet."""
    norm = [normalizers.NFD(), normalizers.StripAccents()] + ([normalizers.Lowercase()] if lowercase else [])
    if kind == "wordpiece":
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.decoder = decoders.WordPiece()
    else:
        tok = Tokenizer(models.BPE(unk_token="[UNK]"))
        tok.decoder = decoders.BPEDecoder()
    tok.normalizer = normalizers.Sequence(norm)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    seeded = continuation_tokens(tok, texts) if kind == "wordpiece" else []
    cls = trainers.WordPieceTrainer if kind == "wordpiece" else trainers.BpeTrainer
    trainer = cls(vocab_size=vocab_size, special_tokens=SUBWORD_SPECIALS + seeded, show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    return ordinary(tok, set(seeded)) if seeded else tok


def continuation_tokens(tok: Tokenizer, texts) -> list[str]:
    """`##c` for every character that follows another inside a pre-tokenized word, sorted."""
    chars: set[str] = set()
    for text in texts:
        for word, _ in tok.pre_tokenizer.pre_tokenize_str(tok.normalizer.normalize_str(text)):
            chars.update(word[1:])
    return [f"##{c}" for c in sorted(chars)]


def ordinary(tok: Tokenizer, seeded: set[str]) -> Tokenizer:
    """The tokenizer with the seeded `##c` tokens as plain vocabulary entries, not added tokens."""
    data = json.loads(tok.to_str())
    data["added_tokens"] = [t for t in data["added_tokens"] if t["content"] not in seeded]
    return Tokenizer.from_str(json.dumps(data))


def tokenizer_problem(tok: Tokenizer) -> str | None:
    """What makes a stranger's tokenizer unusable by attnexp, checked field by field before any text
    meets it (a WordPiece model whose [UNK] is not in its vocabulary raised inside encode), or None."""
    missing = [t for t in ("[CLS]", "[SEP]", "[PAD]") if tok.token_to_id(t) is None]
    if missing:
        return f"the tokenizer has no {'/'.join(missing)} token{'s' if len(missing) > 1 else ''}"
    unk = getattr(tok.model, "unk_token", None)
    if unk is not None and tok.token_to_id(str(unk)) is None:
        return f"its {type(tok.model).__name__} model names {str(unk)[:40]!r} for unknown text, which is not in its vocabulary"
    n = tok.get_vocab_size()
    if n > MAX_VOCAB:
        return f"it has {n:,} tokens, beyond attnexp's limit of {MAX_VOCAB:,}"
    return None


def finish(tok: Tokenizer, max_len: int) -> Tokenizer:
    """[CLS] text [SEP], truncated to max_len: the same for trained and loaded tokenizers."""
    problem = tokenizer_problem(tok)
    if problem:
        raise ValueError(f"{problem}; use a BERT-style tokenizer.json")
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    tok.enable_truncation(max_len)
    tok.no_padding()
    return tok


MAX_TOKENIZER_BYTES = 64 << 20  # a BERT tokenizer.json is ~0.7 MB, XLM-R's 17 MB
MAX_VOCAB = 10_000_000


def from_text(text: str) -> Tokenizer:
    """Tokenizer.from_str for a stranger's tokenizer.json: a part the Rust library cannot build (a
    Precompiled normalizer whose charsmap is garbage) panics there, which reaches Python as pyo3's
    PanicException, a BaseException that `except Exception` lets through, after Rust's panic hook has
    printed its own lines to the process's stderr. Both are caught here: a ValueError of one line."""
    import tempfile

    saved = os.dup(2)
    with tempfile.TemporaryFile() as said:
        os.dup2(said.fileno(), 2)  # Rust's hook writes to file descriptor 2, not to sys.stderr
        try:
            return Tokenizer.from_str(text)
        except BaseException as e:
            if type(e).__name__ != "PanicException":
                raise
            raise ValueError(f"the tokenizers library failed on it: {' '.join(str(e).split())[:120]}") from None
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def read_tokenizer(spec: str, key: str) -> Tokenizer:
    """A tokenizer.json path (or a hub name), read as data with its size checked first: a file
    over 64 MB, not UTF-8, not a tokenizer, or with a vocabulary over 10 million is one line."""
    p = Path(spec)
    if not p.is_file():
        try:
            return Tokenizer.from_pretrained(spec)
        except Exception as e:  # noqa: BLE001 - tokenizers raises its own exceptions (offline, not found)
            raise ConfigError(f"{key}={spec!r}: no such tokenizer.json, and none could be fetched ({str(e)[:80]})") from None
    from attnexp.config.files import FileRefused, read_bytes

    try:  # the one reading rule: a regular file, its size checked before a byte is read
        raw = read_bytes(p, MAX_TOKENIZER_BYTES)
    except FileRefused as e:
        if e.size is not None:
            raise ConfigError(f"{key}={spec!r} is {e.size / 2**20:.0f} MB; a tokenizer.json is at most "
                              f"{MAX_TOKENIZER_BYTES >> 20} MB") from None
        raise ConfigError(f"{key}={spec!r}: {e}; give a tokenizer.json that tokenizers saved") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{key}={spec!r} is not UTF-8 text (byte {e.start}: {e.reason}); give a tokenizer.json "
                          f"that tokenizers saved") from None
    try:
        tok = from_text(text)
    except Exception as e:  # noqa: BLE001
        raise ConfigError(f"{key}={spec!r} is not a tokenizer.json tokenizers can read ({str(e)[:80]})") from None
    if tok.get_vocab_size() > MAX_VOCAB:
        raise ConfigError(f"{key}={spec!r} has {tok.get_vocab_size():,} tokens, beyond attnexp's limit of {MAX_VOCAB:,}")
    return tok


def get_tokenizer(spec: str | None, texts_fn, cache_dir: Path, key: dict, kind: str, vocab_size: int,
                  lowercase: bool, max_len: int) -> tuple[Tokenizer, bool]:
    """Returns (tokenizer, trained_now). `texts_fn` is only called when one must be trained."""
    if spec is not None:
        return finish(read_tokenizer(spec, "data.tokenizer"), max_len), False
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    path = cache_dir / f"tokenizer-{digest}.json"
    if path.is_file():
        return finish(read_tokenizer(str(path), "the cached tokenizer"), max_len), False
    tok = train_tokenizer(texts_fn(), kind, vocab_size, lowercase)
    path.parent.mkdir(parents=True, exist_ok=True)
    with whole(path) as tmp:  # whole or not at all, and two processes never share a temporary name
        tok.save(str(tmp))
    return finish(tok, max_len), True
