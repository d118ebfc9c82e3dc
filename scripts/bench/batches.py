#!/usr/bin/env python
"""Host time to make one training batch: the per-example collator (a Python loop over the items, what
the loader ran before) against the table's tensor slices (attnexp.data.table, what it runs now), on
the same batches in the same order, for each built-in data set. Ratios in one process, interleaved
rounds (this machine is shared and noisy): median microseconds a batch over `--rounds` rounds of
`--batches` batches each, as wall time and as the process's CPU time (torch's intra-op threads spin:
a gather that takes 10 us of wall time can take a second core's CPU too), at `--threads` (default:
torch's thread count here, which a default run keeps on an idle machine).

    python scripts/bench/batches.py
    python scripts/bench/batches.py --rounds 3 --batches 20      # quicker

Writes scripts/results/batches_<device>.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO / "tests"))

from common import markdown_table, provenance  # noqa: E402

NEWSGROUPS = REPO.parent / "shared" / "data" / "20newsgroups"
CASES = {
    "toy, causal LM (batch 64)": ["task=lm", "attention=causal", "data.batch_size=64"],
    "toy, masked LM (batch 64)": ["task=lm", "attention=bidirectional", "data.batch_size=64"],
    "repeat (batch 32, 66 tokens)": ["experiment=induction_heads", "data.n_train=4000"],
    "20 Newsgroups, classify (batch 32, <=256 tokens)": ["data=newsgroups", "task=classify", "data.limit=2000",
                                                         "data.vocab_size=2000", f"data.path={NEWSGROUPS}"],
    "20 Newsgroups bytes, LM (batch 32, 64 tokens)": ["experiment=induction_text", "data.limit=2000",
                                                      f"data.path={NEWSGROUPS}"],
}


def time_us(fn, keys: list) -> tuple[float, float]:
    """(wall, CPU) microseconds a batch."""
    t0, c0 = time.perf_counter(), time.process_time()
    for k in keys:
        fn(k)
    return (time.perf_counter() - t0) / len(keys) * 1e6, (time.process_time() - c0) / len(keys) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--batches", type=int, default=50)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--out", default=str(REPO / "scripts" / "results"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from attnexp.data import build_datamodule
    from helpers.runs import run_of

    rows = []
    for name, overrides in CASES.items():
        run = run_of(overrides)
        dm = build_datamodule(run.data, run.task, causal=run.attention.causal, seed=0)
        dm.setup()
        table, collator = dm.table("train", per_epoch=True), dm.collator(per_epoch=True)
        keys = list(dm._loader("train", shuffle=True).batch_sampler)[: args.batches]
        items = dm.splits["train"]  # data=text's: its windows as items (data.text.Rows), made on demand

        def collate(k, items=items, collator=collator):
            return collator([{**items[i], "epoch": e} for e, i in k])
        old, new = [], []
        for _ in range(args.rounds):
            old.append(time_us(collate, keys))
            new.append(time_us(table.__getitems__, keys))
        (o, oc), (n, nc) = ([statistics.median(x[i] for x in xs) for i in (0, 1)] for xs in (old, new))
        rows.append({"data": name, "collator us": round(o, 1), "table us": round(n, 1), "ratio": round(o / n, 2),
                     "collator cpu us": round(oc, 1), "table cpu us": round(nc, 1), "cpu ratio": round(oc / nc, 2)})
        print(rows[-1], flush=True)
    result = {"device": f"cpu ({torch.get_num_threads()} threads)", "threads": args.threads, "torch": torch.__version__,
              "rounds": args.rounds, "batches": args.batches, "made": provenance(), "results": rows}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "batches_cpu.json").write_text(json.dumps(result, indent=2) + "\n")
    print(markdown_table([list(r.values()) for r in rows], list(rows[0])))


if __name__ == "__main__":
    main()
