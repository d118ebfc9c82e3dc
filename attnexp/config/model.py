"""The attention layer's and the model's settings, with their checks."""

from __future__ import annotations

from dataclasses import dataclass

from attnexp.config.checks import check, one_of

MAX_LEN = 131_072  # longer sequences than this are a typo here, not an experiment
LIMITS = {"d_model": 65_536, "n_heads": 1_024, "n_layers": 1_000, "max_len": MAX_LEN}


@dataclass
class AttentionConfig:
    name: str = "mha"
    mask: str = "causal"  # causal | bidirectional
    backend: str = "sdpa"  # eager | sdpa | flex (linear attention: eager | linear)
    dropout: float = 0.0  # on the attention probabilities
    # The packed q/k/v projection's initialisation: normal = N(0, 0.02) as every other weight (GPT-2,
    # nanoGPT); xavier = torch.nn.MultiheadAttention's own (xavier_uniform_ over the packed matrix,
    # ~4x larger at d=64). Variants with one packed q/k/v projection only (mha and its kin, torch_mha).
    qkv_init: str = "normal"
    # Options of single variants (null: the variant's default, or unused); each variant lists the
    # ones it reads in its `options`, and setting one another variant reads is a config error.
    window: int | None = None  # sliding_window: keys within this many positions
    n_kv_heads: int | None = None  # gqa: key/value heads shared by groups of query heads
    rope_base: float | None = None  # rotary, mla: base of the angle frequencies (default 10000)
    eps: float | None = None  # linear, softpick: denominator guard (default 1e-6)
    kv_rank: int | None = None  # mla: width of the joint key/value latent (default 32)
    q_rank: int | None = None  # mla: width of the query latent; 0 = queries not compressed (default 0)
    rope_dim: int | None = None  # mla: per-head width of the decoupled RoPE part of q and k (default 8)
    sigmoid_bias: float | None = None  # sigmoid: the constant b in sigmoid(score + b) (default -log(model.max_len))
    forget_bias_init: float | None = None  # forgetting: the forget gate's initial bias (default 0: f = 0.5, as FoX)
    smear_init: float | None = None  # smeared: each head's initial a, its own key's share sigmoid(a) (default 0: 0.5)

    @property
    def causal(self) -> bool:
        return self.mask == "causal"


@dataclass
class ModelConfig:
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int | None = None  # default 4 * d_model
    dropout: float = 0.0
    max_len: int = 128
    pos_emb: str = "auto"  # auto | learned | none  (auto: none when the variant encodes positions)
    tie_embeddings: bool = True
    compile: bool = False  # torch.compile the training forward and loss together (the map probe keeps the eager modules)
    # Start from pretrained weights: "hf:<hub name or local folder>" (BERT or GPT-2 family, through
    # transformers: pip install 'attnexp[hf]'). Sizes, the fields below and the tokenizer then come
    # from the checkpoint's config.
    init: str | None = None
    norm: str = "pre"  # pre (GPT-2, nanoGPT) | post (BERT: LayerNorm after each residual add)
    ln_eps: float = 1e-5  # LayerNorm eps (BERT: 1e-12)
    activation: str = "gelu"  # gelu | gelu_tanh (GPT-2's "gelu_new")
    type_vocab_size: int = 0  # token-type (segment) embeddings, as BERT's sentence A/B; 0 = none
    embed_norm: bool = False  # a LayerNorm on the summed embeddings (BERT)
    # false: attention-only blocks, no MLP (Olsson et al. 2022 and Elhage et al. 2021 study induction heads
    # in such models: every computation is in the heads)
    mlp: bool = True

    @property
    def ff_dim(self) -> int:
        return self.d_ff or 4 * self.d_model

    def validate(self) -> None:
        for k, most in LIMITS.items():
            check(getattr(self, k) > 0, f"model.{k}={getattr(self, k)} must be positive")
            check(getattr(self, k) <= most, f"model.{k}={getattr(self, k)} is beyond attnexp's limit of {most:,}")
        check(self.d_ff is None or 0 < self.d_ff <= 16 * LIMITS["d_model"],
              f"model.d_ff={self.d_ff} must be positive (null: 4 * d_model)")
        check(self.d_model % self.n_heads == 0,
              f"model.d_model={self.d_model} is not divisible by model.n_heads={self.n_heads}; "
              f"pick n_heads from {[h for h in range(1, self.d_model + 1) if self.d_model % h == 0 and h <= 64]}")
        check(0 <= self.dropout < 1, f"model.dropout={self.dropout} must be in [0, 1)")
        one_of(self.pos_emb, ("auto", "learned", "none"), "model.pos_emb")
        one_of(self.norm, ("pre", "post"), "model.norm")
        one_of(self.activation, ("gelu", "gelu_tanh"), "model.activation")
        check(self.ln_eps > 0, f"model.ln_eps={self.ln_eps} must be > 0")
        check(self.mlp or self.init is None, "model.mlp=false with model.init: a pretrained model has its MLPs; "
              "leave model.mlp out (or model.init out, to train an attention-only model from scratch)")
        check(self.type_vocab_size >= 0, f"model.type_vocab_size={self.type_vocab_size} must be >= 0")
        check(self.init is None or str(self.init).startswith("hf:") or str(self.init).endswith(".ckpt"),
              f"model.init={self.init!r}: give hf:<hub name or local folder> (e.g. model.init=hf:bert-base-uncased), "
              f"an attnexp checkpoint (a .ckpt file), or null")
