"""Text <-> ids for any DataModule, small enough to travel inside the checkpoint, so that
`attnexp maps ckpt=...` can tokenize new text exactly as in training."""

from __future__ import annotations

from attnexp.config import ConfigError
from attnexp.data.vocab import BOS, EOS, MASK, PAD, WORD_SPECIALS, Vocab, words


class TextEncoder:
    def __init__(self, kind: str, payload, lowercase: bool = True, max_len: int = 512):
        self.kind, self.payload, self.lowercase, self.max_len = kind, payload, lowercase, max_len
        if kind == "words":
            self.vocab = Vocab(payload)
        elif kind == "tokenizer":
            from attnexp.data.tokenizer import finish, from_text

            self.tok = finish(from_text(payload), max_len)
        else:
            raise ValueError(f"Unknown encoder kind {kind!r}")

    @property
    def pad_id(self) -> int:
        return PAD if self.kind == "words" else self.tok.token_to_id("[PAD]")

    @property
    def first_word_id(self) -> int:
        """The first id that is not a special token ([PAD], [CLS], ...): random-token inputs draw above it."""
        if self.kind == "words":
            return len(WORD_SPECIALS)
        special = [i for i, t in self.tok.get_added_tokens_decoder().items() if t.special]
        return max(special, default=-1) + 1

    def encode(self, text: str) -> list[int]:
        if self.kind == "words":
            return self.encode_words(words(text, self.lowercase))
        return self.tok.encode(text).ids

    def encode_words(self, ws: list[str]) -> list[int]:
        """[BOS] w1 .. wn [EOS] for a word-level vocabulary, cut to max_len."""
        return [BOS] + self.vocab.encode(ws[: self.max_len - 2]) + [EOS]

    def unknown_words(self, text: str) -> list[str]:
        """The words of `text` that encode to [UNK] (not in the vocabulary), in order, once each."""
        if self.kind == "words":
            found = [w for w in words(text, self.lowercase) if w not in self.vocab.stoi]
        else:
            unk = self.tok.token_to_id("[UNK]")
            enc = self.tok.encode(text)
            found = [text[a:b] for i, (a, b) in zip(enc.ids, enc.offsets) if i == unk]
        return list(dict.fromkeys(found))

    @property
    def start_id(self) -> int:
        """The token a text begins with: [BOS] for a word vocabulary, [CLS] for a tokenizer's."""
        return BOS if self.kind == "words" else self.tok.token_to_id("[CLS]")

    @property
    def mask_id(self) -> int | None:
        """[MASK]: a masked LM's input, never a causal LM's target (None where a tokenizer has none)."""
        return MASK if self.kind == "words" else self.tok.token_to_id("[MASK]")

    @property
    def end_id(self) -> int:
        """The token that ends a text: [EOS] for a word vocabulary, [SEP] for a tokenizer's."""
        return EOS if self.kind == "words" else self.tok.token_to_id("[SEP]")

    def decode_text(self, ids) -> str:
        """`ids` as text: a word vocabulary's words (no [BOS], [EOS], [PAD]), or the tokenizer's
        decoding without its special tokens."""
        if self.kind == "words":
            return " ".join(t for t in self.vocab.decode(ids) if t not in ("[BOS]", "[EOS]", "[PAD]"))
        return self.tok.decode(list(ids), skip_special_tokens=True)

    def decode(self, ids) -> list[str]:
        if self.kind == "words":
            return self.vocab.decode(ids)
        return [self.tok.id_to_token(int(i)) for i in ids]

    def state(self) -> dict:
        return {"kind": self.kind, "payload": self.payload, "lowercase": self.lowercase, "max_len": self.max_len}

    @classmethod
    def from_state(cls, d: dict) -> TextEncoder:
        return cls(d["kind"], d["payload"], d["lowercase"], d["max_len"])

    @classmethod
    def from_checkpoint(cls, ckpt: dict, key: str = "ckpt", path=None) -> TextEncoder:
        """The encoder a run saved in its checkpoint (its DataModule's state), checked as data from
        a stranger: a malformed one is a ConfigError in one line, never a traceback."""
        state = next((v["encoder"] for k, v in ckpt.items()
                      if isinstance(k, str) and k.endswith("DataModule") and isinstance(v, dict) and "encoder" in v), None)
        if state is None:
            raise ConfigError(f"{key}={str(path)!r} holds no tokenizer (it predates attnexp 0.1's maps); retrain it")
        problem = cls.state_problem(state)
        if problem:
            raise ConfigError(f"{key}={str(path)!r} holds a malformed tokenizer ({problem}); it is not a checkpoint "
                              f"attnexp wrote, or it was damaged")
        try:
            return cls.from_state(state)
        except Exception as e:  # noqa: BLE001 - the tokenizers library raises its own exception types
            first = (str(e).splitlines() or [type(e).__name__])[0][:120]
            raise ConfigError(f"{key}={str(path)!r} holds a tokenizer that cannot be read ({first})") from None

    @staticmethod
    def state_problem(d) -> str | None:
        """What is wrong with a saved encoder state, or None."""
        if not isinstance(d, dict) or not {"kind", "payload", "lowercase", "max_len"} <= set(d):
            return "not a mapping with kind, payload, lowercase and max_len"
        if d["kind"] not in ("words", "tokenizer"):
            return f"kind {str(d['kind'])[:40]!r} is neither words nor tokenizer"
        if not isinstance(d["lowercase"], bool) or not isinstance(d["max_len"], int) or not 3 <= d["max_len"] <= 1_000_000:
            return "lowercase or max_len has the wrong type or size"
        if d["kind"] == "words":
            words_ok = isinstance(d["payload"], list) and all(isinstance(w, str) for w in d["payload"])
            return None if words_ok and len(d["payload"]) >= 6 else "its word list is not a list of words"
        return None if isinstance(d["payload"], str) else "its tokenizer is not a JSON string"
