"""Text from a causal language model, token by token (nanoGPT's `generate`): the last position's
logits over temperature, cut to the top k, sampled; stops at the end token or after max_new_tokens."""

from __future__ import annotations

import math
import sys

import torch

from attnexp.config import ConfigError


def check_samplable(hp: dict, key: str, path) -> None:
    """A checkpoint that has a next-token distribution: a causal language model."""
    task, attention = hp.get("task", {}), hp.get("attention", {})
    if task.get("name") != "lm":
        raise ConfigError(f"{key}={str(path)!r} is a classifier (task={task.get('name')}): it predicts a class, not the "
                          f"next token; sample from a run trained with task=lm attention=causal")
    if attention.get("mask") != "causal":
        raise ConfigError(f"{key}={str(path)!r} is a bidirectional model (masked tokens): it sees both sides of a "
                          f"token and has no next-token distribution; sample from a run trained with attention=causal")


@torch.no_grad()
def generate(model, ids: list[int], max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
             end_id: int | None = None, generator: torch.Generator | None = None, never: tuple[int, ...] = ()) -> list[int]:
    """`ids` continued by up to `max_new_tokens` sampled tokens (the context cropped to the model's
    max_len); temperature 0 takes the most likely token; the tokens in `never` are never drawn."""
    x_BT = torch.tensor([ids], dtype=torch.long)
    for _ in range(max_new_tokens):
        logits_V = model(x_BT[:, -model.m.max_len:]).logits[0, -1].float()
        logits_V[list(never)] = float("-inf")
        if temperature == 0:
            nxt = int(logits_V.argmax())
        else:
            logits_V = logits_V / temperature
            if top_k:
                kth = torch.topk(logits_V, min(top_k, logits_V.numel())).values[-1]
                logits_V = logits_V.masked_fill(logits_V < kth, float("-inf"))
            nxt = int(torch.multinomial(torch.softmax(logits_V, -1), 1, generator=generator))
        x_BT = torch.cat([x_BT, torch.tensor([[nxt]])], 1)
        if nxt == end_id:
            break
    return x_BT[0].tolist()


def sample_text(loaded, prompt: str, max_new_tokens: int = 50, temperature: float = 1.0, top_k: int | None = None,
                num_samples: int = 1, seed: int = 0) -> list[str]:
    """`num_samples` continuations of `prompt` through a loaded checkpoint (attnexp.notebook.loaded),
    each the prompt's words and the sampled ones, decoded; reproducible with `seed`."""
    if loaded.pretrained or loaded.hparams is None:
        raise ConfigError("sample takes an attnexp checkpoint (ckpt=PATH) of a causal language model")
    check_samplable(loaded.hparams, "ckpt", loaded.path)
    if not math.isfinite(temperature):
        raise ConfigError(f"temperature={temperature} must be a finite number >= 0 (0: the most likely token)")
    if max_new_tokens < 1 or temperature < 0 or (top_k is not None and top_k < 1) or num_samples < 1:
        raise ConfigError("max_new_tokens >= 1, temperature >= 0, top_k >= 1 (or none) and num_samples >= 1")
    if max_new_tokens > 100_000 or num_samples > 10_000:
        raise ConfigError(f"max_new_tokens={max_new_tokens} or num_samples={num_samples} is beyond attnexp's limits "
                          f"(100,000 tokens, 10,000 samples)")
    if not 0 <= seed < 2**63:
        raise ConfigError(f"seed={seed} must be in [0, 2**63): torch's generator takes a 64-bit seed")
    enc = loaded.encoder
    unknown = enc.unknown_words(prompt)
    if unknown:
        print(f"attnexp sample: {len(unknown)} word(s) of the prompt are not in the vocabulary and became [UNK]: "
              f"{', '.join(unknown[:10])}{' ...' if len(unknown) > 10 else ''}", file=sys.stderr)
    end = enc.end_id
    ids = enc.encode(prompt)
    ids = ids[:-1] if ids and ids[-1] == end else ids  # the prompt goes on: no end token after it
    g = torch.Generator().manual_seed(seed)
    # a causal LM's targets are next tokens: never the padding (no loss there), the token a text starts
    # with, nor [MASK] (a masked LM's input), yet their logits are finite, and a draw of one went on as if
    # it were a word
    never = tuple(i for i in (enc.pad_id, enc.start_id, enc.mask_id) if i is not None)
    out = []
    for _ in range(num_samples):
        new = generate(loaded.model, ids, max_new_tokens, temperature, top_k, end, g, never)
        out.append(enc.decode_text(new))
    return out
