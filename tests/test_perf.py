"""The fast path and its measurements: FLOP counts and device peaks for MFU, throughput in every
summary, batch lengths rounded for compiled kernels, torch.compile, and the GPU suite's smoke run
(so it cannot rot between GPU sessions). GPU-only checks carry the `cuda` marker."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attnexp.config import AttentionConfig, ModelConfig
from attnexp.data.collate import pad
from attnexp.model import Transformer
from attnexp.perf import attention_flops_per_query, peak_tflops, train_flops_per_position
from attnexp.train import train
from conftest import run_of

REPO = Path(__file__).resolve().parents[1]
CUDA = torch.cuda.is_available()
TINY = ["trainer.max_epochs=1", "data.n_sentences=300", "logger=none", "maps.enabled=false", "test=false"]


def test_flops_per_position_by_hand():
    d, h, L, T, V = 64, 4, 2, 32, 100
    model = Transformer(ModelConfig(d_model=d, n_heads=h, n_layers=L, max_len=T), AttentionConfig(), V)
    per_layer = d * 3 * d + d * d + d * 4 * d + 4 * d * d  # QKV, output, the MLP's two matrices
    assert model.matmul_params() == L * per_layer + d * V  # + the LM head (tied, but still a product)
    bidir = 3 * (2 * model.matmul_params() + L * 4 * T * d)
    assert train_flops_per_position(model.matmul_params(), "fused", False, T, d, h, L) == bidir
    causal = 3 * (2 * model.matmul_params() + L * 4 * (T + 1) / 2 * d)  # the half of the scores computed
    assert train_flops_per_position(model.matmul_params(), "fused", True, T, d, h, L) == causal
    assert attention_flops_per_query("sliding_window", False, 4096, d, h, window=128) == 4 * 128 * d
    assert attention_flops_per_query("linear", True, 4096, d, h) == 4 * h * (d // h) ** 2  # no T in it
    assert attention_flops_per_query("differential", False, T, d, h) == 1.5 * attention_flops_per_query("fused", False, T, d, h)
    assert attention_flops_per_query("mla", False, T, d, h, rope_dim=8) == 2 * T * (d + 8 * h) + 2 * T * d


@pytest.mark.parametrize("device,precision,want", [
    ("NVIDIA H100 80GB HBM3", "bf16-mixed", (989.4, "H100 dense bf16")),
    ("NVIDIA H100 PCIe", "bf16-mixed", (756.0, "H100 PCIe dense bf16")),
    ("NVIDIA H200", "bf16-mixed", (989.4, "H200 dense bf16")),
    ("NVIDIA A100-SXM4-80GB", "32-true", (156.0, "A100 dense tf32")),
    ("NVIDIA L4", "16-mixed", (121.0, "L4 dense fp16")),
    ("Tesla V100-SXM2-16GB", "bf16-mixed", None),  # no bf16 on a V100
    ("cpu (x86_64, 2 threads)", "32-true", None),
    ("Some Future GPU", "bf16-mixed", None),
])
def test_device_peaks(device, precision, want):
    assert peak_tflops(device, precision) == want


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


def test_gpu_suite_smoke_runs_every_part(tmp_path):
    r = subprocess.run([sys.executable, "scripts/gpu_suite.py", "--smoke", f"--out={tmp_path}"], cwd=REPO,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    suite = json.loads((tmp_path / "suite.json").read_text())
    parts = {"cuda-tests", "kernels", "model", "overhead", "newsgroups"}
    pretrained = (REPO.parent / "shared" / "models" / "all-MiniLM-L6-v2" / "config.json").is_file()
    assert set(suite["parts"]) == parts | ({"finetune"} if pretrained else set()) and suite["torch"]
    for name in ("kernels_cpu_smoke.json", "model_cpu_smoke.json", "framework_overhead_cpu.json",
                 "newsgroups_cpu_preset.json", "suite.md", *(["newsgroups_cpu_finetune.json"] if pretrained else [])):
        assert (tmp_path / name).is_file(), name
    rows = json.loads((tmp_path / "kernels_cpu_smoke.json").read_text())["results"]
    assert all(isinstance(r["ours_ms"], float) and r["ours_vs_bare"] > 0 for r in rows)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
def test_a_training_step_never_waits_for_the_gpu():
    from attnexp.lit import AttnexpModule, adamw_warmup_cosine

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
