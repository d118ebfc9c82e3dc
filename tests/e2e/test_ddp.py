"""DDP on CPU processes (gloo): each rank's share of the batches, metrics reduced across ranks and
written once, and the model one process would train on the same global batches, on data of varied
length (issue 55)."""

from __future__ import annotations

import json

import pytest

from helpers.runs import attnexp


@pytest.mark.parametrize("bucket", [False, True])
def test_each_ddp_rank_trains_on_its_own_equal_share_and_validates_each_example_once(bucket, monkeypatch):
    from attnexp.data.base import EpochBatches

    lengths = [3 + i % 7 for i in range(203)]
    train, val = {}, {}
    for rank in (0, 1):
        monkeypatch.setattr(EpochBatches, "_world", staticmethod(lambda rank=rank: (rank, 2)))
        t = EpochBatches(lengths, 16, shuffle=True, seed=0, bucket=bucket)
        v = EpochBatches(lengths, 16, shuffle=False, seed=0, bucket=bucket)
        train[rank], val[rank] = t.batches(), v.batches()
        assert len(train[rank]) == len(t) and len(val[rank]) == len(v)
    assert len(train[0]) == len(train[1]) == 7  # 13 batches of 16 over 2 ranks, one repeated
    assert {tuple(b) for b in train[0]}.isdisjoint({tuple(b) for b in train[1][:-1]})
    assert sorted(i for r in val for b in val[r] for i in b) == list(range(203))


@pytest.mark.slow
def test_ddp_on_two_cpu_processes_reduces_metrics_and_writes_once(tmp_path):
    import torch

    from attnexp.data import build_datamodule
    from attnexp.model import lm_loss
    from attnexp.training.module import AttnexpModule
    from helpers.runs import run_of

    run_dir, steps = tmp_path / "run", tmp_path / "steps"
    ov = ["trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2", "trainer.max_epochs=2", "data.n_sentences=400",
          "logger=csv", "maps.n_examples=2", "trainer.log_every_n_steps=2"]
    probe = ["+callbacks.steps._target_=helpers.ddp_steps.StepsPerRank", f"+callbacks.steps.out={steps}"]
    r = attnexp("train", *ov, *probe, f"hydra.run.dir={run_dir}", cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["status"] == "completed" and len(s["metrics"]["history"]) == 2
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["best-epoch01.ckpt", "last.ckpt"]
    assert sorted(p.name for p in (run_dir / "maps").glob("*.npz")) == ["epoch000.npz", "epoch001.npz", "start.npz"]
    logs = {p.name: p.read_text() for p in run_dir.glob("*.log")}
    probes = {name: text.count("attention maps of epoch") for name, text in logs.items()}
    assert sorted(probes.values()) == [0, 2], probes  # the probe ran on rank 0 only, once an epoch
    # the logged validation loss is the loss over the whole validation split, not one rank's shard
    run = run_of([o for o in ov if not o.startswith("trainer")])
    dm = build_datamodule(run.data, run.task, causal=run.attention.causal, seed=run.seed)
    dm.setup()
    model = AttnexpModule.load_from_checkpoint(run_dir / "checkpoints" / "last.ckpt").model.eval()
    total = n = 0
    with torch.no_grad():
        for b in dm.val_dataloader():
            targets = (b["labels"] != -100).sum().item()
            total += lm_loss(model(b["input_ids"], b["pad_mask"]).logits, b["labels"]).item() * targets
            n += targets
    assert s["metrics"]["history"][-1]["val/loss"] == pytest.approx(total / n, rel=1e-4)
    # what was trained on is every rank's tokens (before: rank 0's times two), and the per-step train/loss
    # is the global batch's, every rank's weighted by its targets (before: rank 0's alone)
    ranks = [[json.loads(x) for x in (steps / f"rank{k}.jsonl").read_text().splitlines()] for k in (0, 1)]
    assert s["train_tokens"] == sum(row["n_tokens"] for rows in ranks for row in rows)
    import csv

    with open(run_dir / "csv" / "metrics.csv") as f:
        logged = [float(row["train/loss"]) for row in csv.DictReader(f) if row.get("train/loss")]
    both = [(a, b) for a, b in zip(*ranks) if "loss" in a]
    assert len(logged) == len(both) >= 3
    for value, (a, b) in zip(logged, both):
        assert value == pytest.approx((a["loss"] * a["count"] + b["loss"] * b["count"]) / (a["count"] + b["count"]), rel=1e-5)
    assert any(abs(a["loss"] - b["loss"]) > 1e-4 for a, b in both)  # the ranks' shards differ: the check can fail


@pytest.mark.slow
def test_ddp_trains_the_one_process_model_on_variable_length_data(tmp_path):
    """Issue 55: each rank's loss was the mean over its own targets and DDP averaged the ranks' gradients,
    so on sentences of different lengths a rank with few targets counted as much as one with many: not
    the global batch's gradient. Now each rank's loss is weighted by its share of the global batch's
    targets (an all-reduce of the count). Replayed in one process on the same global batches (both ranks'
    batches of each step, one mean over all their targets), the per-step loss and the final weights agree
    within 1e-5."""
    import torch

    from attnexp.model import lm_loss
    from attnexp.training.module import AttnexpModule, adamw_warmup_cosine

    run_dir, out = tmp_path / "run", tmp_path / "batches"
    ov = ["trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2", "trainer.max_steps=8", "task=lm",
          "attention=causal", "data.n_sentences=400", "data.batch_size=8", "logger=none", "maps.enabled=false",
          "test=false", "trainer.log_every_n_steps=1", "optim.warmup_steps=2", "trainer.precision=64-true"]
    probe = ["+callbacks.batches._target_=helpers.ddp_batches.BatchesPerRank", f"+callbacks.batches.out={out}",
             "+callbacks.steps._target_=helpers.ddp_steps.StepsPerRank", f"+callbacks.steps.out={out}"]
    r = attnexp("train", *ov, *probe, f"hydra.run.dir={run_dir}", cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    steps = [[json.loads(x) for x in (out / f"rank{k}.jsonl").read_text().splitlines()] for k in (0, 1)]
    logged = [(a["loss"] * a["count"] + b["loss"] * b["count"]) / (a["count"] + b["count"]) for a, b in zip(*steps)]
    ranks = [torch.load(out / f"rank{k}.pt", weights_only=False) for k in (0, 1)]
    init = torch.load(out / "init.pt", weights_only=False)
    counts = [[int((b["labels"] != -100).sum()) for b in rank] for rank in ranks]
    assert any(a != b for a, b in zip(*counts))  # the ranks' targets differ: the check can fail
    module = AttnexpModule.load_from_checkpoint(run_dir / "checkpoints" / "last.ckpt")
    module.double().load_state_dict(init["state"])  # float64, as the run (64-true): only the gradient's weighting can differ
    module.train()
    opt, sched = adamw_warmup_cosine(module.parameters(), module.ocfg, init["schedule_steps"], fused=True)
    replayed = []
    for b0, b1 in zip(*ranks):
        total = sum(int((b["labels"] != -100).sum()) for b in (b0, b1))
        loss = sum(lm_loss(module.model(b["input_ids"], b["pad_mask"] if b["padded"] else None).logits, b["labels"])
                   * int((b["labels"] != -100).sum()) for b in (b0, b1)) / total
        replayed.append(loss.item())
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
        opt.step()
        sched.step()
    assert len(logged) == len(replayed) == 8 and max(abs(a - b) for a, b in zip(logged, replayed)) < 1e-5, (logged, replayed)
    ddp = AttnexpModule.load_from_checkpoint(run_dir / "checkpoints" / "last.ckpt").state_dict()
    worst = max((ddp[k] - v).abs().max().item() for k, v in module.state_dict().items() if v.is_floating_point())
    assert worst < 1e-5, worst
