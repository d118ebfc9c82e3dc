"""A small pre-norm transformer whose attention comes from the registry. Plain nn.Module: no
Lightning, no DictConfig. Legend: B batch, T time, D d_model, H heads, V vocab, C classes."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnexp import attention
from attnexp.attention import MaskSpec
from attnexp.config import AttentionConfig, ModelConfig
from attnexp.config.data import IGNORE


@dataclass
class ModelOutput:
    logits: Tensor  # (B, T, V) for language modelling, (B, C) for classification
    hidden_BTD: Tensor
    attn: list[Tensor] | None = None  # one (B, H, T, T) per layer: the weights applied to V, when asked


class Block(nn.Module):
    """Pre-norm (x + f(LN(x)), GPT-2/nanoGPT) or post-norm (LN(x + f(x)), BERT) residual block."""

    def __init__(self, m: ModelConfig, a: AttentionConfig, layer: int = 0):
        super().__init__()
        self.post = m.norm == "post"
        self.ln1, self.ln2 = nn.LayerNorm(m.d_model, eps=m.ln_eps), nn.LayerNorm(m.d_model, eps=m.ln_eps)
        self.attn = attention.build(m.d_model, m.n_heads, a, layer, m)
        act = nn.GELU(approximate="tanh" if m.activation == "gelu_tanh" else "none")
        self.mlp = nn.Sequential(nn.Linear(m.d_model, m.ff_dim), act, nn.Linear(m.ff_dim, m.d_model)) if m.mlp else None
        if not m.mlp:  # attention-only (model.mlp=false): no second sublayer, and no norm before it
            self.ln2 = None
        self.drop = nn.Dropout(m.dropout)

    def forward(self, x_BTD, mask: MaskSpec, need_weights: bool = False, head_mask_H: Tensor | None = None):
        if self.mlp is None:
            y, w = self.attn(x_BTD if self.post else self.ln1(x_BTD), mask, need_weights, head_mask_H)
            x_BTD = x_BTD + self.drop(y)
            return (self.ln1(x_BTD) if self.post else x_BTD), w
        if self.post:
            y, w = self.attn(x_BTD, mask, need_weights, head_mask_H)
            x_BTD = self.ln1(x_BTD + self.drop(y))
            return self.ln2(x_BTD + self.drop(self.mlp(x_BTD))), w
        y, w = self.attn(self.ln1(x_BTD), mask, need_weights, head_mask_H)
        x_BTD = x_BTD + self.drop(y)
        return x_BTD + self.drop(self.mlp(self.ln2(x_BTD))), w


class Transformer(nn.Module):
    """Token (+ position) embeddings, N blocks, final norm, then one head:
    `lm` (next-token or masked-token prediction, weights tied to the embedding) or
    `classify` (pooled over real tokens: cls = first, last = last real, mean = masked mean)."""

    def __init__(self, m: ModelConfig, a: AttentionConfig, vocab_size: int, head: str = "lm",
                 num_classes: int | None = None, pooling: str = "cls"):
        super().__init__()
        self.m, self.a, self.head_kind, self.pooling = m, a, head, pooling
        self.tok_emb = nn.Embedding(vocab_size, m.d_model)
        learned = m.pos_emb == "learned" or (m.pos_emb == "auto" and not attention.get(a.name).positional)
        self.pos_emb = nn.Embedding(m.max_len, m.d_model) if learned else None
        self.type_emb = nn.Embedding(m.type_vocab_size, m.d_model) if m.type_vocab_size else None
        self.emb_ln = nn.LayerNorm(m.d_model, eps=m.ln_eps) if m.embed_norm else nn.Identity()
        self.drop = nn.Dropout(m.dropout)
        self.blocks = nn.ModuleList(Block(m, a, i) for i in range(m.n_layers))
        self.ln_f = nn.Identity() if m.norm == "post" else nn.LayerNorm(m.d_model, eps=m.ln_eps)  # post-norm ends normed
        if head == "lm":
            self.head = nn.Linear(m.d_model, vocab_size, bias=False)
            if m.tie_embeddings:
                self.head.weight = self.tok_emb.weight
        elif head == "classify":
            self.head = nn.Linear(m.d_model, num_classes)
        else:
            raise ValueError(f"Unknown head {head!r}; choose lm or classify")
        self.apply(self._init)
        for block in self.blocks:
            block.attn.init_qkv(a.qkv_init)  # one scheme for every variant's q/k/v projection (attention.qkv_init)
            block.attn.initialise()

    @staticmethod
    def _init(mod):
        if isinstance(mod, (nn.Linear, nn.Embedding)):
            nn.init.normal_(mod.weight, std=0.02)
            if getattr(mod, "bias", None) is not None:
                nn.init.zeros_(mod.bias)

    def forward(self, input_ids_BT: Tensor, pad_mask_BT: Tensor | None = None, need_weights: bool = False,
                head_mask_LH: Tensor | None = None, token_type_ids_BT: Tensor | None = None) -> ModelOutput:
        """head_mask_LH: 1 keeps a head, 0 silences it (its output is zeroed before the output projection).
        token_type_ids_BT: segment ids (BERT's sentence A = 0, B = 1); zeros when not given."""
        B, T = input_ids_BT.shape
        if T > self.m.max_len:
            raise ValueError(f"sequence length {T} exceeds model.max_len={self.m.max_len}")
        # pad_mask_BT=None (a batch without padding) lets SDPA take its fastest (flash, is_causal) path.
        mask = MaskSpec(causal=self.a.causal, key_valid_BT=pad_mask_BT, window=self.a.window)
        x = self.tok_emb(input_ids_BT)
        if self.pos_emb is not None:
            x = x + self.pos_emb(torch.arange(T, device=x.device))
        if self.type_emb is not None:
            types = torch.zeros_like(input_ids_BT) if token_type_ids_BT is None else token_type_ids_BT
            x = x + self.type_emb(types)
        x = self.drop(self.emb_ln(x))
        maps = []
        for i, block in enumerate(self.blocks):
            x, w = block(x, mask, need_weights, None if head_mask_LH is None else head_mask_LH[i])
            maps.append(w)
        x = self.ln_f(x)
        logits = self.head(x) if self.head_kind == "lm" else self.head(self.pool(x, pad_mask_BT))
        return ModelOutput(logits=logits, hidden_BTD=x, attn=maps if need_weights else None)

    def pool(self, x_BTD: Tensor, pad_mask_BT: Tensor | None) -> Tensor:
        if pad_mask_BT is None:
            pad_mask_BT = torch.ones(x_BTD.shape[:2], dtype=torch.bool, device=x_BTD.device)
        if self.pooling == "cls":
            return x_BTD[:, 0]
        if self.pooling == "last":  # right padding: last real token is at length - 1
            last_B = pad_mask_BT.sum(1) - 1
            return x_BTD[torch.arange(x_BTD.shape[0], device=x_BTD.device), last_B]
        w = pad_mask_BT.to(x_BTD.dtype)[..., None]
        return (x_BTD * w).sum(1) / w.sum(1).clamp_min(1)

    # What readers of a model (heads/, the notebook) ask of it, by name rather than through m / a
    @property
    def causal(self) -> bool:
        return self.a.causal

    @property
    def max_len(self) -> int:
        return self.m.max_len

    @property
    def attention_name(self) -> str:
        return self.a.name

    @property
    def type_vocab_size(self) -> int:
        return self.m.type_vocab_size

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def matmul_params(self) -> int:
        """Weights of the matrix products every position goes through (projections, MLPs, the LM
        head; not the embedding lookups, not a classifier applied once per sequence): for MFU."""
        n = sum(m.weight.numel() for name, m in self.named_modules() if isinstance(m, nn.Linear) and name != "head")
        n += sum(m.in_proj_weight.numel() for m in self.modules() if isinstance(m, nn.MultiheadAttention))
        return n + (self.head.weight.numel() if self.head_kind == "lm" else 0)


def lm_loss(logits_BTV: Tensor, labels_BT: Tensor) -> Tensor:
    return F.cross_entropy(logits_BTV.flatten(0, 1), labels_BT.flatten(), ignore_index=IGNORE)
