"""A run folder's layout, declared once: every module that writes or reads a file of it names it from
here (tests/unit/test_architecture.py holds that no other module spells one). What a run actually
wrote is recorded in its summary.json (attention_maps.written); this says where each thing goes.

    <run>/summary.json              the run's record (attnexp.results.summary)
    <run>/config_resolved.yaml      the composed config, resolved
    <run>/.attnexp.lock             held while a run owns the folder (attnexp.results.folder)
    <run>/checkpoints/last.ckpt     the newest state (best-epochNN.ckpt, step-NNNNNNN.ckpt beside it;
                                    interrupted.ckpt, on_exception.ckpt where a run stopped)
    <run>/eval/<ckpt>_<split>/      `attnexp eval`'s folder: summary.json, predictions.json
    <run>/test_reads.jsonl          each read of the run's test split (attnexp.results.test_reads)
    <run>/maps/viewer.html          the attention viewer; evolution_exK.gif, timeline.jsonl, timeline.png
    <sweep>/results.md, results.csv, results_groups.csv, optuna_results.json
    <sweep>/refused.txt             a line for each job of the launch refused its folder (cli/sweep_end.py)
"""

from __future__ import annotations

SUMMARY = "summary.json"
CONFIG = "config_resolved.yaml"
LOCK = ".attnexp.lock"
CHECKPOINTS = "checkpoints"
LAST = "last.ckpt"
BEST, STEP = "best-epoch{epoch:02d}", "step-{step:07d}"  # Lightning's filename templates (it adds .ckpt)
STEPS = "step-*.ckpt"
INTERRUPTED, ON_EXCEPTION = "interrupted.ckpt", "on_exception.ckpt"  # a stop signal's, an exception's
EVAL = "eval"
MAPS = "maps"
VIEWER = "viewer.html"
TIMELINE = "timeline.jsonl"
TIMELINE_PICTURE = "timeline.png"
SWEEP_TABLE, SWEEP_CSV, SWEEP_GROUPS_CSV = "results.md", "results.csv", "results_groups.csv"
STUDY_RESULTS = "optuna_results.json"
REFUSED = "refused.txt"
TEST_READS = "test_reads.jsonl"
RESERVE_FILE = ".summary.reserve"  # bytes a running run keeps aside, given up for its last record on a full disk
TOKENIZER = "tokenizer.json"  # a run's own tokenizer (data=newsgroups, data=text), as the data module trained or read it
PREDICTIONS = "predictions.json"  # <eval folder>/: a classifier's prediction for each example of the split


def gif(example: int) -> str:
    """The animation of one probe example's maps over training."""
    return f"evolution_ex{example}.gif"


GIFS = gif(0).replace("0", "*")  # every example's, as a glob
