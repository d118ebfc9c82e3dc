"""Result files say how they were made (issue 55 item 5): every file scripts/common.write_results writes,
and the benchmarks' own, carry `made`: the command, the commit and whether the tree had changes, the
libraries, the device, its threads and cores, the date."""

from __future__ import annotations

import json
import sys

from helpers.runs import REPO


def test_a_result_file_says_how_it_was_made(tmp_path, monkeypatch):
    sys.path.insert(0, str(REPO / "scripts"))
    import common

    monkeypatch.setattr(sys, "argv", ["scripts/studies/some_study.py", "--seeds", "3"])
    common.write_results(tmp_path, "study_cpu", {"seeds": [0, 1, 2]}, [{"seed": 0, "acc": 0.5}], "A study")
    made = json.loads((tmp_path / "study_cpu.json").read_text())["made"]
    assert made["command"] == "python scripts/studies/some_study.py --seeds 3"
    assert made["commit"] and made["tree_changed"] in (True, False)
    assert made["libraries"]["torch"] and made["libraries"]["lightning"] and made["threads"] >= 1 and made["cores"] >= 1
    assert made["device"].startswith(("cpu", "NVIDIA")) and made["date"][:2] == "20"
    assert '"made": {"command": "python scripts/studies/some_study.py --seeds 3"' in (tmp_path / "study_cpu.md").read_text()


def test_this_sessions_benchmarks_write_it_too():
    for script in ("scripts/bench/batches.py", "scripts/bench/framework_overhead.py", "scripts/studies/atlas.py",
                   "scripts/studies/readme_heads.py", "scripts/studies/readme_maps.py", "scripts/studies/newsgroups.py",
                   "scripts/studies/newsgroups_seeds.py", "scripts/studies/finetune.py"):
        assert "provenance(" in (REPO / script).read_text(), script


RULE = "64a3f4b"  # the commit from which write_results and the benchmarks wrote `made`
FIELDS = ("command", "commit", "libraries", "device", "threads", "cores", "date")
# written since RULE by scripts that did not yet add `made` (their writers do now: the next run adds it).
# Of them only readme_maps.json's newsgroups part quotes the test split: the accuracy its run's summary.json
# records from that run's one test=true (the run folder is gone; a rerun of the part trains a new one).
NOT_YET = {"atlas_cpu_heads.json", "atlas_cpu_heads_xavier.json", "images/readme_heads.json",
           "images/readme_maps.json:copy", "images/readme_maps.json:reverse", "images/readme_maps.json:agreement",
           "images/readme_maps.json:newsgroups"}


def quotes_test(x) -> bool:
    """Whether a result's JSON quotes a figure of the test split (a key test..., or a metric named test/...)."""
    if isinstance(x, dict):
        return any((k.startswith("test") and k != "test_reads") or quotes_test(v) for k, v in x.items() if k != "made")
    if isinstance(x, list):
        return any(quotes_test(v) for v in x)
    return isinstance(x, str) and x.startswith("test/")


def written_before_the_rule(path) -> bool:
    """The file's content (its git blob) was committed before RULE."""
    import subprocess

    blob = subprocess.run(["git", "-C", str(REPO), "hash-object", str(path)], capture_output=True, text=True).stdout.strip()
    return bool(subprocess.run(["git", "-C", str(REPO), "log", "--format=%h", f"--find-object={blob}", f"{RULE}^"],
                               capture_output=True, text=True).stdout.strip())


def test_every_result_file_says_how_it_was_made_and_which_calls_scored_test():
    """Issue 55 item 5: each result file written since RULE carries `made` (the command, the commit,
    the libraries, the device and its threads and cores, the date; a file gathering parts made by
    different calls, one `made` a part), and one quoting the test split says which calls scored it
    (`test_reads`: each run's own record of the reads of its test split, or what the script scored itself)."""
    import subprocess

    import pytest

    if subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{RULE}^"], capture_output=True).returncode:
        pytest.skip(f"this checkout lacks the history back to {RULE} (a shallow clone)")
    results = REPO / "scripts" / "results"
    checked = 0
    for path in sorted(results.rglob("*.json")):
        name = str(path.relative_to(results))
        doc = json.loads(path.read_text())
        if name.endswith("_predictions.json") or name in NOT_YET or written_before_the_rule(path):
            continue  # _predictions.json: the data of the result file of its name, which says how it was made
        made = doc.get("made") if isinstance(doc, dict) else None
        assert isinstance(made, dict), f"{name} says not how it was made"
        parts = {"": made} if "command" in made else {p: made.get(p) for p in doc if p != "made"}
        for part, m in parts.items():
            if m is None and f"{name}:{part}" in NOT_YET:
                continue
            assert isinstance(m, dict), f"{name}: its part {part!r} says not how it was made"
            assert all(m.get(k) is not None for k in FIELDS), (name, part, [k for k in FIELDS if m.get(k) is None])
            assert m["libraries"]["torch"] and m["threads"] >= 1
            if quotes_test(doc.get(part) if part else doc):
                assert isinstance(m.get("test_reads"), dict) and m["test_reads"], f"{name} {part}: which calls scored test?"
                assert all(isinstance(r, list) for r in m["test_reads"].values())
                twice = [run for run, r in m["test_reads"].items() if run != "this process" and len(r) > 1]
                assert not twice, f"{name}: the test split of {twice} was read more than once"
        checked += 1
    assert checked >= 5


def test_the_test_reads_a_file_records_are_each_runs_own(tmp_path, monkeypatch):
    """provenance(runs=...) copies each run folder's ledger (a sweep folder: every run below it; a
    checkpoint: its run), [] for a run never tested, and what the script scored itself."""
    sys.path.insert(0, str(REPO / "scripts"))
    import common

    from attnexp.results import test_reads

    for run in ("sweep/0", "sweep/1", "alone"):
        (tmp_path / run / "checkpoints").mkdir(parents=True)
        (tmp_path / run / "summary.json").write_text("{}")
        (tmp_path / run / "checkpoints" / "last.ckpt").write_text("")
    (tmp_path / "sweep" / "0" / "eval" / "x").mkdir(parents=True)  # an eval folder is not a run
    (tmp_path / "sweep" / "0" / "eval" / "x" / "summary.json").write_text("{}")
    monkeypatch.setattr(sys, "argv", ["attnexp", "train", "hydra.sweeper.storage=postgresql://u:secret@h/db"])
    test_reads.note(tmp_path / "sweep" / "0", "train test=true", tmp_path / "sweep/0/checkpoints/best-epoch01.ckpt")
    made = common.provenance(runs=[tmp_path / "sweep", tmp_path / "alone" / "checkpoints" / "last.ckpt"],
                             read_here=["a baseline scored here"])
    reads = made["test_reads"]
    assert sorted(reads) == sorted(str(tmp_path / r) for r in ("sweep/0", "sweep/1", "alone")) + ["this process"]
    assert [r["by"] for r in reads[str(tmp_path / "sweep/0")]] == ["train test=true"]
    assert reads[str(tmp_path / "sweep/0")][0]["checkpoint"] == "best-epoch01.ckpt"
    assert "secret" not in json.dumps(made) and reads[str(tmp_path / "sweep/1")] == []
    assert "test_reads" not in common.provenance()
