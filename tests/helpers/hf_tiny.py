"""Tiny randomly initialised BERT and GPT-2 checkpoints, built locally with transformers (no
download), each saved with a fast tokenizer trained on a few sentences: stand-ins for
bert-base-uncased and gpt2 in tests and in the README's example."""

from __future__ import annotations

from pathlib import Path

TEXT = ["the cat sat on the mat", "a dog chased the cat across the garden", "the keys to the cabinet are on the table",
        "we drove to the coast and walked along the beach", "graphics cards render images", "the space shuttle launched"]


def _wordpiece(path: Path):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertTokenizerFast

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok.train_from_iterator(TEXT * 5, trainers.WordPieceTrainer(vocab_size=200, special_tokens=specials))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    fast = BertTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                             sep_token="[SEP]", mask_token="[MASK]")
    fast.save_pretrained(path)
    return fast


def tiny_bert(path: Path, seed: int = 0) -> Path:
    import torch
    from transformers import BertConfig, BertModel

    if (path / "config.json").exists():
        return path
    tok = _wordpiece(path)
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                     max_position_embeddings=128, type_vocab_size=2)
    BertModel(cfg).save_pretrained(path)
    return path


def tiny_gpt2(path: Path, seed: int = 0) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2Model, GPT2TokenizerFast

    if (path / "config.json").exists():
        return path
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(TEXT * 5, trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"],
                                                          initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    end = "<|endoftext|>"
    fast = GPT2TokenizerFast(tokenizer_object=tok, eos_token=end, bos_token=end, unk_token=end)
    fast.save_pretrained(path)
    torch.manual_seed(seed)
    eos = fast.eos_token_id
    cfg = GPT2Config(vocab_size=len(fast), n_embd=32, n_layer=2, n_head=4, n_positions=128, bos_token_id=eos, eos_token_id=eos)
    GPT2Model(cfg).save_pretrained(path)
    return path
