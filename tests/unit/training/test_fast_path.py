"""The fast path and its measurements: FLOP counts and device peaks for MFU, throughput in every
summary, batch lengths rounded for compiled kernels, torch.compile, and the GPU suite's smoke run
(so it cannot rot between GPU sessions). GPU-only checks carry the `cuda` marker."""

from __future__ import annotations

import pytest
import torch

from attnexp.api import train
from attnexp.data.collate import pad
from helpers.runs import (
    run_of,
)

CUDA = torch.cuda.is_available()
TINY = ["trainer.max_epochs=1", "data.n_sentences=300", "logger=none", "maps.enabled=false", "test=false"]


def test_a_summary_reports_throughput_and_flops(tmp_path):
    s = train(run_of(TINY, tmp_path))
    perf = s["perf"]
    assert perf["tokens_per_s"] > 0 and perf["tflops"] > 0 and perf["mfu"] is None  # no known peak for a CPU
    assert s["startup_s"] is None  # trained from Python, not `python -m attnexp`: no start to count from


def test_batch_lengths_round_up_for_compiled_kernels():
    ids, mask = pad([[5, 6, 7], [8]], 0, multiple=128, cap=200)
    assert ids.shape == (2, 128) and mask.sum().item() == 4
    assert pad([[1] * 150], 0, multiple=128, cap=200)[0].shape == (1, 200)  # not beyond the model's max_len
    assert pad([[1] * 5], 0)[0].shape == (1, 5)
    assert pad([[1] * 5], 0, multiple=8)[0].shape == (1, 8)  # no cap: rounded all the same


def test_flex_runs_get_rounded_batches(tmp_path):
    from attnexp.data import build_datamodule

    run = run_of(["data.n_sentences=300", "data.pad_to_multiple_of=16"])
    dm = build_datamodule(run.data, run.task, causal=True)
    dm.setup()
    assert {b["input_ids"].shape[1] % 16 for b in dm.train_dataloader()} <= {0, 64 % 16}


@pytest.mark.slow
def test_compiled_model_trains_and_saves_plain_weights(tmp_path):
    s = train(run_of([*TINY, "model.compile=true", "maps.enabled=true", "maps.n_examples=2"], tmp_path))
    assert s["status"] == "completed" and (tmp_path / "maps" / "epoch000.npz").is_file()  # the probe: eager modules
    keys = torch.load(s["checkpoints"]["last"], weights_only=True)["state_dict"]
    assert keys and not [k for k in keys if "_orig_mod" in k]


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
def test_a_training_step_never_waits_for_the_gpu():
    from attnexp.training.module import AttnexpModule, adamw_warmup_cosine

    run = run_of(["model=small"])
    module = AttnexpModule.from_configs(run.model, run.attention, run.task, run.optim, 200, None).cuda()
    opt, _ = adamw_warmup_cosine(module.parameters(), run.optim, 100, fused=True)
    ids = torch.randint(6, 200, (8, 64), device="cuda")
    pad_mask = torch.ones_like(ids, dtype=torch.bool)
    pad_mask[0, 50:] = False
    labels = ids.masked_fill(~pad_mask, -100)
    batch = {"input_ids": ids, "pad_mask": pad_mask, "labels": labels, "padded": True}
    for mode in ("default", "error"):  # warm up, then any device-to-host sync raises
        torch.cuda.set_sync_debug_mode(mode)
        try:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = module.model_step(batch, "train")
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        finally:
            torch.cuda.set_sync_debug_mode("default")


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="FlexAttention trains only on CUDA")
def test_flex_compiles_once_per_rounded_length(tmp_path):
    from torch._dynamo.utils import counters

    counters.clear()
    s = train(run_of(["attention.backend=flex", "trainer=gpu", "data=synthetic", "data.kind=copy", "data.length=8",
                      "data.bucket=true", "trainer.max_epochs=1", "logger=none", "maps.enabled=false", "test=false",
                      "data.n_train=2000"], tmp_path))
    assert s["status"] == "completed"
    graphs = counters["stats"]["unique_graphs"]
    assert graphs <= 8, f"{graphs} compiled graphs for one rounded length"


def test_fused_adamw_clips_under_bf16_mixed(tmp_path):
    """A GPU run (fused AdamW, bf16-mixed, the default trainer.gradient_clip_val=1.0) stopped at its
    first step: Lightning's MixedPrecision refuses to clip for a fused optimizer even where no scaler
    scales anything (Lightning #21435). The same plugin on the CPU, with the optimizer the GPU gets."""
    import lightning as L

    from attnexp.data import build_datamodule
    from attnexp.training.module import AttnexpModule, adamw_warmup_cosine

    class FusedLikeOnGpu(AttnexpModule):
        def configure_optimizers(self):
            opt, _ = adamw_warmup_cosine(self.parameters(), self.ocfg, 10, fused=True)
            opt.register_step_pre_hook(lambda o, *_: norms.append(float(torch.nn.utils.get_total_norm(
                [p.grad for g in o.param_groups for p in g["params"] if p.grad is not None]))))
            return opt

    norms = []  # each step's gradient norm as the optimizer sees it: after clipping
    run = run_of(["model=small", "data.n_sentences=64"])
    dm = build_datamodule(run.data, run.task, causal=True)
    dm.setup()
    module = FusedLikeOnGpu.from_configs(run.model, run.attention, run.task, run.optim, dm.vocab_size, None)
    trainer = L.Trainer(accelerator="cpu", precision="bf16-mixed", gradient_clip_val=1e-3, max_steps=3, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, limit_val_batches=0,
                        default_root_dir=tmp_path)
    trainer.fit(module, datamodule=dm)
    assert len(norms) == 3 and max(norms) <= 1e-3 * 1.01  # clipped, as Lightning clips an unfused optimizer's


def test_compiled_flex_has_room_for_a_runs_shapes():
    """Past Dynamo's recompile_limit (8 by default) compiled flex_attention silently ran uncompiled:
    the kernel grid's flex rows on an H100 were 18x slower than SDPA after the eighth shape. Making
    the CUDA kernel (no GPU needed to wrap it) raises the limit to a run's worth of shapes."""
    import torch._dynamo.config as dynamo

    from attnexp.attention.kernels import FLEX_SHAPES, _flex_fn

    _flex_fn("cuda")
    assert dynamo.recompile_limit >= FLEX_SHAPES >= 32
