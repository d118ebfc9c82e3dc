"""Pretrained weights from Hugging Face `transformers`: BERT-family encoders and GPT-2-family
decoders mapped into attnexp's own Transformer (attention `mha`), so their maps come from the
same code as a model trained here. `model.init=hf:<hub name or folder>` when training;
`python -m attnexp maps hf=<...> text=...` to look at one.

The mapping, tensor by tensor:

    BERT                                           attnexp
    embeddings.{word,position,token_type}_emb...   tok_emb, pos_emb, type_emb
    embeddings.LayerNorm                           emb_ln
    layer.i.attention.self.{query,key,value}       blocks.i.attn.qkv   (stacked [q; k; v])
    layer.i.attention.output.dense / LayerNorm     blocks.i.attn.out / blocks.i.ln1   (post-norm)
    layer.i.intermediate.dense, output.dense       blocks.i.mlp.0, blocks.i.mlp.2
    layer.i.output.LayerNorm                       blocks.i.ln2
    pooler, MLM head                               not imported (a classifier head starts fresh)

    GPT-2 (Conv1D weights are stored transposed)   attnexp
    wte, wpe                                       tok_emb (tied to the LM head), pos_emb
    h.i.ln_1, h.i.attn.c_attn, h.i.attn.c_proj     blocks.i.ln1, blocks.i.attn.qkv, blocks.i.attn.out
    h.i.ln_2, h.i.mlp.c_fc, h.i.mlp.c_proj         blocks.i.ln2, blocks.i.mlp.0, blocks.i.mlp.2
    ln_f                                           ln_f

Loading goes through `transformers` (pip install 'attnexp[hf]'); safetensors files load as data.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import replace
from pathlib import Path

import torch

from attnexp import attention
from attnexp.config import AttentionConfig, ConfigError, ModelConfig, hub_offline
from attnexp.config.paths import default_cache_dir, whole
from attnexp.model.transformer import Transformer

KINDS = {"bert": "BERT-family encoder", "gpt2": "GPT-2-family decoder"}


def source_of(init: str) -> str:
    return init[3:] if init.startswith("hf:") else init


def _transformers():
    try:
        import transformers
    except ImportError:
        raise ConfigError("pretrained models need transformers: pip install 'attnexp[hf]'") from None
    transformers.utils.logging.set_verbosity_error()  # no weight-loading bars and notices in a run's log
    transformers.utils.logging.disable_progress_bar()
    return transformers


def _offline() -> bool:
    return hub_offline("TRANSFORMERS_OFFLINE")


def _fail_to_load(source: str, e: Exception) -> ConfigError:
    if Path(source).exists():
        first = (str(e).splitlines() or [""])[0][:200]
        return ConfigError(f"hf:{source}: cannot read a transformers model there ({type(e).__name__}: {first})")
    if source.startswith((".", "/", "~")) or source.count("/") > 1:  # a path: a hub name is NAME or ORG/NAME
        return ConfigError(f"hf:{source}: no such folder (from {Path.cwd()}); give the folder that holds the model's "
                           f"config.json and weights, hf:DIR (a relative path is read from the folder you run in)")
    return ConfigError(f"hf:{source}: no such folder, and the Hugging Face hub cannot give it here "
                       f"({'offline' if _offline() else type(e).__name__}); download it where you are online "
                       f"(huggingface-cli download {source} --local-dir DIR) and give hf:DIR")


MAX_CONFIG_BYTES = 1 << 20  # a config.json is a few kB
MAX_VOCAB = 10_000_000  # the same bound as attnexp's own checkpoints


def check_folder(source: str) -> None:
    """A local folder's config.json read as data before transformers sees it: one that asks
    transformers to run the folder's own Python code (`auto_map`), or names a model family attnexp
    does not map, is refused at once (transformers would otherwise ask "Do you wish to run the
    custom code? [y/N]" and wait on stdin)."""
    cfg = Path(source) / "config.json"
    if not Path(source).is_dir() or not cfg.is_file():
        return
    from attnexp.config.files import FileRefused, read_json

    try:  # the one reading rule: a regular file, its size before a byte, JSON within a nesting limit
        c = read_json(cfg, MAX_CONFIG_BYTES)
    except FileRefused as e:
        if e.size is not None:
            raise ConfigError(f"hf:{source}: config.json is {e.size:,} bytes; a model's config is a few kB") from None
        raise ConfigError(f"hf:{source}: config.json is not UTF-8 JSON ({str(e)[:80]})") from None
    if not isinstance(c, dict):
        raise ConfigError(f"hf:{source}: config.json is not a JSON object")
    if "auto_map" in c:
        raise ConfigError(f"hf:{source}: its config.json asks transformers to run the folder's own Python code (auto_map); "
                          f"attnexp loads BERT- and GPT-2-family models as data only and never runs a folder's code")
    if c.get("model_type") not in KINDS:
        raise ConfigError(f"hf:{source} is a {str(c.get('model_type'))[:40]!r} model; attnexp maps BERT-family encoders "
                          f"(bert) and GPT-2-family decoders (gpt2)")


def hf_config(source: str):
    check_folder(source)
    tr = _transformers()
    try:
        cfg = tr.AutoConfig.from_pretrained(source, trust_remote_code=False,
                                            local_files_only=_offline() or Path(source).exists())
    except Exception as e:  # noqa: BLE001 - transformers raises OSError, ValueError, HTTP errors...
        raise _fail_to_load(source, e) from None
    if cfg.model_type not in KINDS:
        raise ConfigError(f"hf:{source} is a {cfg.model_type!r} model; attnexp maps BERT-family encoders (bert) and "
                          f"GPT-2-family decoders (gpt2)")
    return cfg


def configs(source: str, m: ModelConfig, a: AttentionConfig) -> tuple[ModelConfig, AttentionConfig]:
    """The model and attention settings of a pretrained checkpoint; the attention backend stays
    the user's. Raises a ConfigError for what the mapping does not cover."""
    c = hf_config(source)
    if attention.canonical(a.name) != "mha":
        raise ConfigError(f"model.init=hf:{source} loads pretrained weights into multi-head attention (BERT/GPT layout), "
                          f"not attention={a.name}; drop the attention choice or use attention=bidirectional/causal")
    if c.model_type == "bert":
        act = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}.get(c.hidden_act)
        if act is None or getattr(c, "position_embedding_type", "absolute") != "absolute":
            raise ConfigError(f"hf:{source}: hidden_act={c.hidden_act!r}, position_embedding_type="
                              f"{getattr(c, 'position_embedding_type', None)!r} are not mapped (gelu and absolute positions are)")
        m = replace(m, d_model=c.hidden_size, n_heads=c.num_attention_heads, n_layers=c.num_hidden_layers,
                    d_ff=c.intermediate_size, max_len=c.max_position_embeddings, dropout=c.hidden_dropout_prob,
                    pos_emb="learned", tie_embeddings=True, norm="post", ln_eps=c.layer_norm_eps, activation=act,
                    type_vocab_size=c.type_vocab_size, embed_norm=True)
        a = replace(a, mask="bidirectional", dropout=c.attention_probs_dropout_prob)
        return checked_sizes(source, m, a, c.vocab_size)
    if c.activation_function not in ("gelu_new", "gelu_pytorch_tanh") or c.scale_attn_by_inverse_layer_idx \
            or c.reorder_and_upcast_attn or not c.scale_attn_weights:
        raise ConfigError(f"hf:{source}: activation_function={c.activation_function!r} or its attention scaling options "
                          f"are not mapped (GPT-2's defaults are)")
    m = replace(m, d_model=c.n_embd, n_heads=c.n_head, n_layers=c.n_layer, d_ff=c.n_inner or 4 * c.n_embd,
                max_len=c.n_positions, dropout=c.resid_pdrop, pos_emb="learned", tie_embeddings=True, norm="pre",
                ln_eps=c.layer_norm_epsilon, activation="gelu_tanh", type_vocab_size=0, embed_norm=False)
    return checked_sizes(source, m, replace(a, mask="causal", dropout=c.attn_pdrop), c.vocab_size)


def checked_sizes(source: str, m: ModelConfig, a: AttentionConfig, vocab) -> tuple[ModelConfig, AttentionConfig]:
    """The sizes a folder's config.json states, held to attnexp's limits, and (for a local folder)
    the model they imply held against the elements its weight files really store, before anything
    is built: a config.json may ask for any size at all."""
    sizes = {"d_model": m.d_model, "n_heads": m.n_heads, "n_layers": m.n_layers, "d_ff": m.d_ff, "max_len": m.max_len,
             "type_vocab_size": m.type_vocab_size, "vocab_size": vocab}
    bad = [k for k, v in sizes.items() if not isinstance(v, int) or isinstance(v, bool)]
    if bad or not 0 < vocab <= MAX_VOCAB:
        raise ConfigError(f"hf:{source}: config.json's sizes are not whole numbers within attnexp's limits "
                          f"({', '.join(f'{k}={sizes[k]!r}' for k in bad) or f'vocab_size={vocab:,}'})")
    try:
        m.validate()
        a = attention.validate(a, m)
    except ConfigError as e:
        raise ConfigError(f"hf:{source}: config.json: {e}") from None
    held = held_in_folder(Path(source))
    if held is not None:
        with torch.device("meta"):
            meta = Transformer(m, a, vocab)
        implied = sum(p.numel() for p in meta.parameters())
        if implied > held:
            raise ConfigError(f"hf:{source}: config.json describes a model of {implied:,} parameters but its weight "
                              f"files hold {held:,} values; they do not belong together")
    return m, a


def held_in_folder(folder: Path) -> int | None:
    """The values a folder's weight files store, read without loading them: the safetensors
    headers (whose offsets the format checks against the file's length), or the storages of
    pytorch_model*.bin (loaded as data, memory-mapped). None: not a local folder with weights."""
    if not folder.is_dir():
        return None
    tensors = sorted(folder.glob("*.safetensors"))
    if tensors:
        from safetensors import safe_open

        total = 0
        for f in tensors:
            try:
                with safe_open(str(f), "pt") as st:
                    total += sum(math.prod(st.get_slice(k).get_shape()) for k in st.keys())
            except Exception as e:  # noqa: BLE001 - safetensors raises its own error types
                raise ConfigError(f"hf:{folder}: {f.name} is not a readable safetensors file ({str(e)[:80]})") from None
        return total
    bins = sorted(folder.glob("pytorch_model*.bin"))
    if not bins:
        return None
    from attnexp.model.checkpoints import held_elements

    total = 0
    for f in bins:
        try:
            sd = torch.load(f, map_location="cpu", weights_only=True, mmap=True)
        except Exception as e:  # noqa: BLE001 - the weights-only unpickler raises anything on a bad file
            raise ConfigError(f"hf:{folder}: {f.name} is not a readable weights file ({str(e).splitlines()[0][:80]})") from None
        total += held_elements({k: v for k, v in sd.items() if isinstance(v, torch.Tensor)}, f"hf:{folder}", f.name)
    return total


def tokenizer_of(source: str, cache_dir: str | None = None) -> str:
    """What data.tokenizer should be: the folder's tokenizer.json; for a folder with only a
    WordPiece vocab.txt (older BERT checkpoints), a tokenizer.json that transformers builds from it,
    kept under `cache_dir` (the run's paths.cache_dir; the folder may be read-only); else the hub name."""
    folder = Path(source)
    if not folder.exists():
        return source
    local = folder / "tokenizer.json"
    if local.exists():
        return str(local)
    return str(converted_tokenizer(folder, cache_dir))


def converted_tokenizer(folder: Path, cache_dir: str | None = None) -> Path:
    """The fast tokenizer transformers builds from a checkpoint's slow-tokenizer files (vocab.txt),
    saved once as tokenizer.json in the cache, keyed by the files it was built from."""
    files = sorted(p for p in folder.iterdir() if p.name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json"))
    if not any(p.name == "vocab.txt" for p in files):
        raise ConfigError(f"hf:{folder} has neither tokenizer.json nor vocab.txt; save the tokenizer there with "
                          f"AutoTokenizer.from_pretrained(...).save_pretrained({str(folder)!r})")
    from attnexp.config.files import FileRefused, read_bytes

    try:  # the one reading rule: a pipe named vocab.txt is not waited on, a huge one not read
        digest = hashlib.sha256(b"".join(read_bytes(p, 64 << 20) for p in files)).hexdigest()[:16]
    except FileRefused as e:
        raise ConfigError(f"hf:{folder}: its tokenizer files cannot be used ({e})") from None

    cache = Path(cache_dir or default_cache_dir()).expanduser() / "hf-tokenizers"
    path = cache / f"tokenizer-{digest}.json"
    if not path.is_file():
        tr = _transformers()
        try:
            fast = tr.AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False, use_fast=True,
                                                    local_files_only=True)
        except Exception as e:  # noqa: BLE001 - transformers raises many kinds
            raise _fail_to_load(str(folder), e) from None
        if not getattr(fast, "is_fast", False):
            raise ConfigError(f"hf:{folder}: transformers built no fast tokenizer from its vocab.txt")
        cache.mkdir(parents=True, exist_ok=True)
        with whole(path) as tmp:
            fast.backend_tokenizer.save(str(tmp))
    return path


def hf_state_dict(source: str) -> tuple[str, dict[str, torch.Tensor]]:
    tr = _transformers()
    try:
        model = tr.AutoModel.from_pretrained(source, trust_remote_code=False,
                                             local_files_only=_offline() or Path(source).exists())
    except Exception as e:  # noqa: BLE001
        raise _fail_to_load(source, e) from None
    return model.config.model_type, model.state_dict()


def mapped(kind: str, sd: dict[str, torch.Tensor], n_layers: int) -> dict[str, torch.Tensor]:
    """An attnexp state dict (the encoder/decoder part) from a transformers one."""
    sd = {k.removeprefix("bert.").removeprefix("transformer."): v for k, v in sd.items()}
    out: dict[str, torch.Tensor] = {}

    def copy(dst: str, src: str, transpose: bool = False):
        for p in ("weight", "bias"):
            if f"{src}.{p}" in sd:
                t = sd[f"{src}.{p}"]
                out[f"{dst}.{p}"] = t.t().contiguous() if transpose and p == "weight" else t

    if kind == "bert":
        e = "embeddings"
        out["tok_emb.weight"] = sd[f"{e}.word_embeddings.weight"]
        out["pos_emb.weight"] = sd[f"{e}.position_embeddings.weight"]
        out["type_emb.weight"] = sd[f"{e}.token_type_embeddings.weight"]
        copy("emb_ln", f"{e}.LayerNorm")
        for i in range(n_layers):
            s, b = f"encoder.layer.{i}", f"blocks.{i}"
            for p in ("weight", "bias"):
                out[f"{b}.attn.qkv.{p}"] = torch.cat([sd[f"{s}.attention.self.{n}.{p}"] for n in ("query", "key", "value")])
            copy(f"{b}.attn.out", f"{s}.attention.output.dense")
            copy(f"{b}.ln1", f"{s}.attention.output.LayerNorm")
            copy(f"{b}.mlp.0", f"{s}.intermediate.dense")
            copy(f"{b}.mlp.2", f"{s}.output.dense")
            copy(f"{b}.ln2", f"{s}.output.LayerNorm")
        return out
    out["tok_emb.weight"] = sd["wte.weight"]
    out["pos_emb.weight"] = sd["wpe.weight"]
    for i in range(n_layers):
        s, b = f"h.{i}", f"blocks.{i}"
        copy(f"{b}.ln1", f"{s}.ln_1")
        copy(f"{b}.attn.qkv", f"{s}.attn.c_attn", transpose=True)
        copy(f"{b}.attn.out", f"{s}.attn.c_proj", transpose=True)
        copy(f"{b}.ln2", f"{s}.ln_2")
        copy(f"{b}.mlp.0", f"{s}.mlp.c_fc", transpose=True)
        copy(f"{b}.mlp.2", f"{s}.mlp.c_proj", transpose=True)
    copy("ln_f", "ln_f")
    return out


def load_into(model, source: str) -> None:
    """Copy a pretrained checkpoint's weights into `model` (built from `configs(source, ...)`); the
    task head (a classifier, or BERT's LM head) keeps its fresh initialisation."""
    kind, sd = hf_state_dict(source)
    weights = mapped(kind, sd, len(model.blocks))
    own = model.state_dict()
    for k, v in weights.items():
        if k not in own or own[k].shape != v.shape:
            have = tuple(own[k].shape) if k in own else "nothing"
            raise ConfigError(f"hf:{source}: {k} is {tuple(v.shape)} in the checkpoint but {have} in the model built for it "
                              f"(is the tokenizer's vocabulary the checkpoint's?)")
    missing = [k for k in own if k not in weights and not k.startswith("head.")]
    if missing:
        raise ConfigError(f"hf:{source}: the checkpoint has nothing for {', '.join(missing[:5])}")
    model.load_state_dict(weights, strict=False)
