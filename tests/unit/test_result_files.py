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
    for script in ("scripts/bench/batches.py", "scripts/bench/framework_overhead.py"):
        assert '"made": provenance()' in (REPO / script).read_text(), script
