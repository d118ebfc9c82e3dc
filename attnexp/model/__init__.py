"""The model: a plain nn.Module transformer (no Lightning), pretrained BERT/GPT-2 weights mapped
into it, its FLOP count, and checkpoints read as data."""

from attnexp.model.transformer import Block, ModelOutput, Transformer, lm_loss

__all__ = ["Block", "ModelOutput", "Transformer", "lm_loss"]
