"""`attnexp compare`: runs side by side from their summary.json files."""

from __future__ import annotations

import csv
import json

import pytest

from attnexp.api import load_run, train
from attnexp.cli.compare import compare_cli
from helpers.runs import compose_cfg

COMMON = ["trainer.max_epochs=1", "data.n_sentences=300", "logger=none", "maps.enabled=false",
          "trainer.enable_progress_bar=false"]


def table(out: str) -> list[dict]:
    lines = [x for x in out.splitlines() if x.startswith("|")]
    cols = [c.strip() for c in lines[0].strip("|").split("|")]
    return [dict(zip(cols, (c.strip() for c in x.strip("|").split("|")))) for x in lines[2:]]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    for layers in (1, 2):
        ov = [f"model.n_layers={layers}", "optim.lr=3e-3", *COMMON]
        train(load_run(compose_cfg(ov, root / f"layers{layers}")))
    return root


def test_rows_show_what_differs_and_sort_best_first(two_runs, capsys):
    assert compare_cli([str(two_runs), f"csv={two_runs / 'cmp.csv'}"]) == 0
    rows = table(capsys.readouterr().out)
    assert [r["model.n_layers"] for r in rows] and "optim.lr" not in rows[0]  # same in both: no column
    losses = [json.loads((two_runs / r["run"] / "summary.json").read_text())["metrics"]["best"]["value"] for r in rows]
    assert losses == sorted(losses) and len(rows) == 2  # val/loss: lowest first
    assert rows[0]["status"] == "completed" and rows[0]["best"].startswith("val/loss=") and rows[0]["test/acc"]
    assert len(list(csv.DictReader((two_runs / "cmp.csv").open()))) == 2


def test_sort_by_another_column_and_a_failed_run(two_runs, tmp_path, capsys):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "summary.json").write_text(json.dumps({"schema": 2, "status": "failed", "error": "RuntimeError: boom",
                                                  "overrides": ["model.n_layers=3"], "metrics": {}}))
    assert compare_cli([str(two_runs), str(bad), "sort=model.n_layers"]) == 0
    rows = table(capsys.readouterr().out)
    assert [r["model.n_layers"] for r in rows] == ["1", "2", "3"]
    assert rows[-1]["status"] == "failed" and "boom" in rows[-1]["error"]


@pytest.mark.parametrize("args,needle", [
    ([], "no summary.json under"),
    (["sort=val/nope"], "sort='val/nope' is not a column; choose one of: run"),
    (["/no/such/dir"], "/no/such/dir: no such folder"),
])
def test_mistakes_are_one_line(args, needle, two_runs, tmp_path, capsys):
    where = [str(tmp_path)] if not args or args[0].startswith("sort") else []
    if args and args[0].startswith("sort"):
        where = [str(two_runs)]
    assert compare_cli([*where, *args]) == 2
    assert needle in capsys.readouterr().err
