"""attnexp/results/summary.py, the owner of summary.json: what it writes (strict JSON, atomically, a
reserve for the final record on a full disk), what it accepts when reading a stranger's file (one
line naming the first thing wrong), and what a sweep takes from it (the objective). Before, its
behaviour was tested only through training runs and compare; no test was named for it."""

from __future__ import annotations

import json

import pytest

from attnexp.config import layout
from attnexp.results import summary
from attnexp.results.summary import Status, SummaryError


def record(**over) -> dict:
    return {**summary.header(Status.COMPLETED, None, "/runs/x"), "metrics": {"final": {"val/loss": 1.5}, "test": {},
                                                                           "best": None, "history": []}, **over}


def test_a_record_is_written_strict_whole_and_with_its_reserve(tmp_path):
    """Issue 68 item 6: summary.json was padded with blanks to 65,536 bytes (the full-disk reserve); it is
    plain JSON of its own size now, the reserve a file of its own while the run runs."""
    path, spare = tmp_path / summary.NAME, tmp_path / layout.RESERVE_FILE
    summary.write(path, record(metrics={"final": {"val/loss": float("nan")}, "test": {}, "best": None, "history": []}),
                  reserve=summary.RESERVE)
    text = path.read_text()
    assert text == json.dumps(json.loads(text), indent=2) + "\n" and "NaN" not in text  # NaN is null in strict JSON
    assert spare.stat().st_size == summary.RESERVE
    summary.write(path, record(), reserve=0)  # the last record gives the reserve up
    assert not spare.exists() and json.loads(path.read_text())["status"] == "completed"
    summary.write(path, record(metrics={"final": {"val/loss": float("nan")}, "test": {}, "best": None, "history": []}),
                  reserve=summary.RESERVE)
    text = path.read_text()
    data = json.loads(text)
    assert data["schema"] == summary.SCHEMA and data["status"] == "completed" and data["metrics"]["final"]["val/loss"] is None
    assert not list(tmp_path.glob(".*.tmp"))  # the temporary file was renamed over, not left
    assert summary.read(path)["run_dir"] == "/runs/x" and summary.read_status(tmp_path) == Status.COMPLETED


@pytest.mark.parametrize("bad, says", [
    ({"status": "done"}, "status 'done' is not one of"),
    ({"steps": "10"}, "'steps' is a str"),
    ({"metrics": {"final": {"val/loss": "low"}}}, "metrics.final holds something other than numbers"),
    ({"metrics": {"best": {"value": "x", "monitor": 1}}}, "metrics.best has no numeric value"),
])
def test_a_strangers_record_is_refused_naming_the_first_thing_wrong(tmp_path, bad, says):
    path = tmp_path / summary.NAME
    path.write_text(json.dumps({**record(), **bad}))
    with pytest.raises(SummaryError, match=says):
        summary.read(path)
    assert summary.read_status(tmp_path) is None
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(SummaryError, match="not UTF-8"):
        summary.read(path)


def test_the_objective_is_the_best_value_else_the_monitored_final_one():
    best = {"final": {}, "test": {}, "best": {"value": 0.25, "monitor": "val/loss"}, "history": []}
    assert summary.objective(record(metrics=best)) == 0.25
    assert summary.objective(record(), "val/loss") == 1.5 and summary.objective(record(), "val/acc") is None
