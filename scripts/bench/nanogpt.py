"""nanoGPT's GPT, transcribed from karpathy/nanoGPT model.py (commit 3adf61e, MIT licence,
Copyright (c) 2022 Andrej Karpathy), so scripts/bench/model.py can time attnexp's Transformer beside
the code its users compare it with, on the same GPU, in the same loop.

Kept as written there: the fused q/k/v projection, SDPA with is_causal=True, LayerNorm with an
optional bias, GELU MLP, weight tying, the GPT-2 init (residual projections scaled by
1/sqrt(2 * n_layer)), the loss in the forward. Left out: the non-flash path (torch >= 2.0 always has
SDPA), from_pretrained, configure_optimizers (the bench gives every arm the same AdamW),
estimate_mfu (the bench counts FLOPs one way for every arm), generate, crop_block_size, and the
print of the parameter count.

NanoGPTLoop, below, is its train.py loop, transcribed the same way (framework_overhead.py's `nanogpt` arm).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F


class LayerNorm(nn.Module):
    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, input):
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head, self.n_embd, self.dropout = config.n_head, config.n_embd, config.dropout

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=self.dropout if self.training else 0,
                                           is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


@dataclass
class GPTConfig:
    block_size: int = 1024
    vocab_size: int = 50304
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        assert t <= self.config.block_size, f"Cannot forward sequence of length {t}, block size is only {self.config.block_size}"
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        if targets is not None:
            logits = self.lm_head(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        else:
            logits = self.lm_head(x[:, [-1], :])
            loss = None
        return logits, loss


class WithLoss(nn.Module):
    """attnexp's Transformer with nanoGPT's forward signature: `(X, Y) -> (logits, loss)`, the loss inside."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, X, Y):
        from attnexp.model import lm_loss

        logits = self.model(X).logits
        return logits, lm_loss(logits, Y)


class NanoGPTLoop:
    """nanoGPT's own training loop (karpathy/nanoGPT train.py, MIT licence, Copyright (c) 2022 Andrej
    Karpathy), transcribed: `get_batch` draws random windows from a `np.memmap` of the training tokens
    (recreated every batch, as there), pinned and copied non_blocking on a GPU; AdamW from its
    `configure_optimizers` (weight decay on 2-D parameters only, fused on CUDA); `torch.compile` when
    model.compile is set, of the model *with its loss* (nanoGPT's `model(X, Y)` computes the loss inside
    its forward, so its compiled graph holds the cross-entropy), once for the loop's life: a loop
    trained again (`train` called again, `reset` between) reuses the compiled graph; its gradient
    accumulation with a GradScaler (enabled for float16 only); warmup + cosine `get_lr`; `loss.item()`
    only at `log_interval`; `estimate_loss` and a checkpoint at every `eval_interval`. The model is
    attnexp's Transformer (the same as every arm's), the tokens those of attnexp's data=text written
    to train.bin / val.bin, so only the loop differs. An "epoch"
    is as many iterations as the other arms' epoch has batches, with an evaluation of as many
    batches as their validation, so fit time and the step clock compare alike
    (scripts/bench/framework_overhead.py's `nanogpt` arm)."""

    def __init__(self, run, dm, model, device, out_dir: Path):
        from contextlib import nullcontext

        import numpy as np

        self.model, self.device = model, device
        if not hasattr(dm, "windows"):
            raise SystemExit("the nanogpt arm reads a token stream: give data=text (the other arms read the same tokens)")
        for split in ("train", "val"):  # nanoGPT's prepare.py output: uint16 token ids, one stream a split
            dm.windows[split].flatten().numpy().astype(np.uint16).tofile(out_dir / f"{split}.bin")
        self.out_dir, self.run = out_dir, run
        self.block_size, self.batch_size, self.device_type = run.data.max_len, run.data.batch_size, self.device.type
        self.gradient_accumulation_steps = run.trainer.accumulate_grad_batches or 1
        self.iters_per_epoch = len(dm.train_dataloader()) // self.gradient_accumulation_steps
        self.eval_iters, self.eval_interval = len(dm.val_dataloader()), self.iters_per_epoch
        self.log_interval = run.trainer.log_every_n_steps or 50
        self.max_iters = run.trainer.max_epochs * self.iters_per_epoch
        self.learning_rate, self.min_lr = run.optim.lr, run.optim.lr * run.optim.min_lr_ratio
        self.warmup_iters, self.lr_decay_iters = run.optim.warmup_steps, self.max_iters
        self.grad_clip = run.trainer.gradient_clip_val or 0.0
        self.ptdtype = torch.bfloat16 if self.device_type == "cuda" else torch.float32
        self.ctx = nullcontext() if self.device_type == "cpu" else \
            torch.amp.autocast(device_type=self.device_type, dtype=self.ptdtype)
        with_loss = WithLoss(model)
        self.compiled = run.model.compile
        self.model_with_loss = torch.compile(with_loss) if run.model.compile else with_loss
        self.initial = {k: v.detach().clone() for k, v in model.state_dict().items()}

    def reset(self) -> None:
        """The model's weights as they were when the loop was made: the next `train` starts afresh and
        reuses the compiled graph."""
        self.model.load_state_dict(self.initial)

    def get_batch(self, split):
        import numpy as np

        data = np.memmap(self.out_dir / f"{split}.bin", dtype=np.uint16, mode="r")
        block_size = self.block_size
        ix = torch.randint(len(data) - block_size, (self.batch_size,))
        x = torch.stack([torch.from_numpy((data[i:i + block_size]).astype(np.int64)) for i in ix])
        y = torch.stack([torch.from_numpy((data[i + 1:i + 1 + block_size]).astype(np.int64)) for i in ix])
        if self.device_type == "cuda":
            x, y = x.pin_memory().to(self.device, non_blocking=True), y.pin_memory().to(self.device, non_blocking=True)
        else:
            x, y = x.to(self.device), y.to(self.device)
        return x, y

    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type):
        import inspect

        param_dict = {pn: p for pn, p in self.model.named_parameters() if p.requires_grad}
        decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
        nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
        optim_groups = [{"params": decay_params, "weight_decay": weight_decay},
                        {"params": nodecay_params, "weight_decay": 0.0}]
        fused_available = "fused" in inspect.signature(torch.optim.AdamW).parameters
        use_fused = fused_available and device_type == "cuda"
        extra_args = dict(fused=True) if use_fused else dict()
        return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas, **extra_args)

    def get_lr(self, it):
        import math

        if it < self.warmup_iters:
            return self.learning_rate * (it + 1) / (self.warmup_iters + 1)
        if it > self.lr_decay_iters:
            return self.min_lr
        decay_ratio = (it - self.warmup_iters) / (self.lr_decay_iters - self.warmup_iters)
        coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
        return self.min_lr + coeff * (self.learning_rate - self.min_lr)

    def forward(self, X, Y):  # nanoGPT's model(X, Y) -> (logits, loss), compiled whole
        return self.model_with_loss(X, Y)

    @torch.no_grad()
    def estimate_loss(self):
        out = {}
        self.model.eval()
        for split in ["val"]:  # nanoGPT estimates train and val; the other arms validate on val only
            losses = torch.zeros(self.eval_iters)
            for k in range(self.eval_iters):
                X, Y = self.get_batch(split)
                with self.ctx:
                    logits, loss = self.forward(X, Y)
                losses[k] = loss.item()
            out[split] = losses.mean()
        self.model.train()
        return out

    def train(self, clock) -> dict:
        """The loop, `clock` told of each epoch and iteration (framework_overhead.StepClock)."""
        run, model = self.run, self.model
        scaler = torch.amp.GradScaler(self.device_type, enabled=self.ptdtype == torch.float16)
        optimizer = self.configure_optimizers(run.optim.weight_decay, self.learning_rate, tuple(run.optim.betas),
                                              self.device_type)
        X, Y = self.get_batch("train")
        iter_num, best_val_loss, val_loss = 0, 1e9, float("nan")
        t_start = time.perf_counter()
        while True:
            if iter_num % self.iters_per_epoch == 0:
                clock.epoch()
            clock.tick()
            lr = self.get_lr(iter_num)
            for param_group in optimizer.param_groups:
                param_group["lr"] = lr
            for _micro_step in range(self.gradient_accumulation_steps):
                with self.ctx:
                    logits, loss = self.forward(X, Y)
                    loss = loss / self.gradient_accumulation_steps
                X, Y = self.get_batch("train")
                scaler.scale(loss).backward()
            if self.grad_clip != 0.0:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), self.grad_clip)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            if iter_num % self.log_interval == 0:
                lossf = loss.item() * self.gradient_accumulation_steps  # noqa: F841 - nanoGPT prints it
            iter_num += 1
            if iter_num % self.eval_interval == 0:  # nanoGPT evaluates before a step; here at an epoch's end, as the others
                val_loss = float(self.estimate_loss()["val"])
                if val_loss < best_val_loss:
                    best_val_loss = val_loss
                    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "iter_num": iter_num,
                                "best_val_loss": best_val_loss}, self.out_dir / "ckpt.pt")
            if iter_num >= self.max_iters:
                break
        return {"fit_s": round(time.perf_counter() - t_start, 2), "steps": iter_num, "final_val_loss": round(val_loss, 6)}
