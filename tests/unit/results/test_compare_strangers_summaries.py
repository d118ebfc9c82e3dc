"""`compare` over summary.json files a stranger, a crash or a full disk shaped (issue 52): generated
damaged, truncated, nested, wrongly typed and oversized copies of a real record, beside two good runs.
For each: exit 0, the good runs in the table, the bad one left out in one line (or compared, where it
is still a record), no traceback, nothing in the folders changed. Before: a record nested 100,000 deep
was a RecursionError traceback, `peak_memory.cpu_max_rss_mb: "lots"` and history entries of strings
ValueError tracebacks (no table for the good runs either), a named pipe called summary.json hung
compare, a 2 GB sparse one cost 4.2 GB and 49 s."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attnexp.api import load_run, train
from attnexp.cli.compare import compare_cli
from helpers.runs import compose_cfg

COMMON = ["trainer.max_epochs=2", "data.n_sentences=300", "logger=none", "maps.enabled=false",
          "trainer.enable_progress_bar=false", "test=false"]
JUNK = st.recursive(st.none() | st.booleans() | st.integers(-10**30, 10**30) | st.floats(allow_nan=False)
                    | st.text(max_size=20), lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                        st.text(max_size=8), inner, max_size=3), max_leaves=8)


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    root = tmp_path_factory.mktemp("good")
    for layers in (1, 2):
        train(load_run(compose_cfg([f"model.n_layers={layers}", *COMMON], root / f"layers{layers}")))
    train(load_run(compose_cfg(["model.n_layers=1", "seed=7", *COMMON], root / "layers1_seed7")))  # a group of seeds
    return root


def paths_in(obj, prefix=()):
    """Every (path) to a value inside a JSON object."""
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from paths_in(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from paths_in(v, (*prefix, i))


def replaced(record: dict, path: tuple, value) -> dict:
    out = copy.deepcopy(record)
    node = out
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return out


def digest(folder) -> dict:
    """Every file but the stranger's (a 2 GB sparse one is not hashed): compare writes into no run folder."""
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.parent.name != "stranger"}


def compare_beside_good(good, tmp_path, capsys, write) -> tuple[str, str]:
    where = tmp_path / "runs"
    shutil.rmtree(where, ignore_errors=True)
    shutil.copytree(good, where)
    (where / "stranger").mkdir()
    write(where / "stranger" / "summary.json")
    before = digest(where)
    capsys.readouterr()
    assert compare_cli([str(where)]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err and sum("left out" in x for x in err.splitlines()) <= 1, err
    assert sum(1 for x in out.splitlines() if x.startswith("| layers")) == 3, out  # the good runs, whatever the stranger
    assert digest(where) == before
    return out, err


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_wrongly_typed_record_never_stops_compare(good, tmp_path, capsys, data):
    record = json.loads((good / "layers1" / "summary.json").read_text())
    path = data.draw(st.sampled_from([p for p in paths_in(record) if p]))
    value = data.draw(JUNK)
    compare_beside_good(good, tmp_path, capsys, lambda p: p.write_text(json.dumps(replaced(record, path, value))))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.floats(0, 1))
def test_a_record_cut_short_never_stops_compare(good, tmp_path, capsys, cut):
    text = (good / "layers1" / "summary.json").read_bytes()
    compare_beside_good(good, tmp_path, capsys, lambda p: p.write_bytes(text[: int(len(text) * cut)]))


@pytest.mark.parametrize("kind", ["deep", "sparse", "pipe", "nan"])
def test_deep_huge_and_special_records_are_left_out_in_one_line(kind, good, tmp_path, capsys):
    def write(p):
        if kind == "deep":  # 200 kB
            p.write_text('{"status": "completed", "metrics": ' + "[" * 100_000 + "]" * 100_000 + "}")
        elif kind == "sparse":
            with open(p, "wb") as f:
                f.truncate(2 * 1024**3)
        elif kind == "pipe":
            os.mkfifo(p)
        else:
            p.write_text('{"status": "completed", "metrics": {"final": {"val/loss": NaN}}}')

    t0 = time.perf_counter()
    _, err = compare_beside_good(good, tmp_path, capsys, write)
    assert time.perf_counter() - t0 < 20
    said = {"deep": "nested over 64 deep", "sparse": "2,147,483,648 bytes, over the", "pipe": "not a regular file",
            "nan": "holds NaN, which is not JSON"}[kind]
    assert said in err, err
