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
    assert rows[0]["status"] == "completed" and rows[0]["best"].startswith("val/loss=") and rows[0]["best_val/acc"]
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


def test_sort_by_a_validation_metric_adds_its_column(two_runs, capsys):
    """compare's usage offered `sort=val/loss`, and it was refused: only the test metrics were columns.
    A validation metric sorts by each run's last value (W&B's run summary), shown in a column of its own."""
    assert compare_cli([str(two_runs), "sort=val/acc"]) == 0
    rows = table(capsys.readouterr().out)
    accs = [json.loads((two_runs / r["run"] / "summary.json").read_text())["metrics"]["final"]["val/acc"] for r in rows]
    assert accs == sorted(accs, reverse=True) and [r["val/acc"] for r in rows] == [f"{a:.4f}" for a in accs]


@pytest.mark.parametrize("args,needle", [
    ([], "no summary.json under"),
    (["sort=val/nope"], "sort='val/nope' is not a column; choose one of: run"),
    (["sort=val/nope"], "; or a validation metric: val/acc, val/loss"),
    (["/no/such/dir"], "/no/such/dir: no such folder"),
])
def test_mistakes_are_one_line(args, needle, two_runs, tmp_path, capsys):
    where = [str(tmp_path)] if not args or args[0].startswith("sort") else []
    if args and args[0].startswith("sort"):
        where = [str(two_runs)]
    assert compare_cli([*where, *args]) == 2
    assert needle in capsys.readouterr().err


@pytest.mark.parametrize("key", ["csv", "md", "report"])
def test_an_output_file_is_checked_before_anything_is_read_and_its_folder_made(key, two_runs, tmp_path, capsys):
    """Before: `csv=` (an unset variable), a folder, or a path through a file ended in a traceback after
    the table was printed; a file in a folder not yet made was a FileNotFoundError for csv= and md=."""
    (tmp_path / "a_file").write_text("")
    for bad in ("", str(tmp_path), str(tmp_path / "a_file" / "x.out")):
        assert compare_cli([str(two_runs), f"{key}={bad}"]) == 2, bad
        out = capsys.readouterr()
        assert out.out == "" and out.err.count("\n") == 1 and f"{key}=" in out.err and "Traceback" not in out.err, out.err
    made = tmp_path / "new" / "deeper" / f"runs.{key}"
    assert compare_cli([str(two_runs), f"{key}={made}"]) == 0 and made.stat().st_size > 0


BAD = {  # a summary.json from anywhere: each is left out with one line, the rest compared
    "a JSON list": b"[1, 2]",
    "'metrics' is a str": b'{"status": "completed", "metrics": "oops"}',
    "not UTF-8": b'{"status": "completed", "error": "\xff\xfe"}',
    "not valid JSON": b'{"status": "compl',
    "metrics.final holds something other than numbers": b'{"status": "completed", "metrics": {"final": {"val/loss": "low"}}}',
    "'status' is a list": b'{"status": ["completed"], "metrics": {}}',
}


def test_malformed_summaries_are_listed_one_line_each_and_the_rest_compared(two_runs, tmp_path, capsys):
    import shutil

    for layers in (1, 2):
        shutil.copytree(two_runs / f"layers{layers}", tmp_path / f"layers{layers}")
    for i, content in enumerate(BAD.values()):
        (tmp_path / f"bad{i}").mkdir()
        (tmp_path / f"bad{i}" / "summary.json").write_bytes(content)
    (tmp_path / "folder" / "summary.json").mkdir(parents=True)  # a folder of that name
    assert compare_cli([str(tmp_path), f"report={tmp_path / 'report.html'}"]) == 0
    out, err = capsys.readouterr()
    said = [x for x in err.splitlines() if x.startswith("attnexp compare: left out")]
    assert len(said) == len(BAD) + 1, err
    for needle in (*BAD, "a folder, not a file"):
        assert any(needle in x for x in said), (needle, said)
    assert len(table(out)) == 2 and (tmp_path / "report.html").is_file()


def test_override_values_with_dollars_do_not_break_the_report(two_runs, tmp_path, capsys):
    import shutil

    for layers in (1, 2):
        shutil.copytree(two_runs / f"layers{layers}", tmp_path / f"layers{layers}")
        s = json.loads((tmp_path / f"layers{layers}" / "summary.json").read_text())
        s["overrides"] = [f"+data.note=$x^^y{layers}$"]  # matplotlib would parse it as (broken) mathtext
        (tmp_path / f"layers{layers}" / "summary.json").write_text(json.dumps(s))
    assert compare_cli([str(tmp_path), f"report={tmp_path / 'report.html'}"]) == 0
    assert "$x^^y1$" in (tmp_path / "report.html").read_text()


def test_p_values_and_intervals_need_no_scipy(monkeypatch):
    import math
    import sys

    from scipy import stats as scipy_stats

    from attnexp.results import significance as stats

    a, b = [2.0, 2.1, 2.2], [2.05, 2.3, 2.25, 2.4]
    want_p = scipy_stats.ttest_ind(a, b, equal_var=False).pvalue
    want_q = [scipy_stats.t.ppf(0.975, df) for df in (1, 2, 3, 7, 30)]
    monkeypatch.setitem(sys.modules, "scipy", None)  # a plain install: no scipy at all
    assert math.isclose(stats.welch_p(a, b), want_p, rel_tol=1e-9)
    assert all(math.isclose(stats.t_quantile(df), q, rel_tol=1e-9) for df, q in zip((1, 2, 3, 7, 30), want_q))


def test_compare_says_which_sweep_it_picked(two_runs, tmp_path, monkeypatch, capsys):
    import shutil

    sweep = tmp_path / "multirun" / "2026-01-01" / "00-00-00"
    shutil.copytree(two_runs, sweep)
    monkeypatch.chdir(tmp_path)
    assert compare_cli([]) == 0
    assert "attnexp compare: the newest sweep, multirun/2026-01-01/00-00-00" in capsys.readouterr().err


def test_the_report_says_how_many_heads_carry_90_percent_of_the_importance_per_group(two_runs, tmp_path):
    import shutil

    import numpy as np

    imps = {1: np.array([[0.5, 0.3, 0.1, 0.1]]), 2: np.array([[0.25, 0.25], [0.25, 0.25]])}  # 3 of 4 heads; all 4
    for layers in (1, 2):
        run = tmp_path / f"layers{layers}"
        shutil.copytree(two_runs / f"layers{layers}", run)
        (run / "maps").mkdir()
        roles = np.array([["previous", "<b>x</b>"] * 2]).reshape(imps[layers].shape) if layers == 2 else \
            np.array([["previous", "broad", "mixed", "first"]])
        np.savez(run / "maps" / "epoch000.npz", stat_importance=imps[layers], roles=roles)
        s = json.loads((run / "summary.json").read_text())
        s["attention_maps"] = {"dir": str(run / "maps")}
        (run / "summary.json").write_text(json.dumps(s))
    assert compare_cli([str(tmp_path), f"report={tmp_path / 'report.html'}"]) == 0
    page = (tmp_path / "report.html").read_text()
    section = page.split("<h2>Which heads matter</h2>", 1)[1].split("<h2>", 1)[0]
    assert "<td>model.n_layers=1</td><td>1</td><td>4</td><td>3</td>" in section, section[:800]
    assert "<td>model.n_layers=2</td><td>1</td><td>4</td><td>4</td>" in section
    assert "&lt;b&gt;x&lt;/b&gt;" in section and "<b>x</b>" not in section  # a role from a stranger's file: text


def test_the_report_needs_no_torch():
    """`attnexp compare report=` reads JSON and .npz only: importing what its head-importance section
    uses must not pull torch in (~2 s of start-up; it once did, for a constant)."""
    import subprocess
    import sys

    code = ("import sys; from pathlib import Path; import attnexp.cli.compare; from attnexp.results import report; "
            "from attnexp.results.compare import Table; report.importance_and_roles(Table([(Path('/nowhere/run/summary.json'), "
            "{'status': 'completed', 'overrides': [], 'metrics': {}})])); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"


def test_snapshots_that_would_inflate_or_are_not_npz_are_left_out_in_one_line(two_runs, tmp_path, capsys):
    """Before: a 0.1 MB epoch001.npz whose member holds 400 MB of zeros was inflated whole by the
    report (6 GB took 7 minutes and a MemoryError in the outside check), and a text file named
    epoch000.npz gave a traceback."""
    import resource
    import shutil
    import zipfile

    import numpy as np

    from attnexp.maps import snapshot

    for layers, bad in ((1, "bomb"), (2, "text")):
        run = tmp_path / f"layers{layers}"
        shutil.copytree(two_runs / f"layers{layers}", run)
        (run / "maps").mkdir()
        np.savez(run / "maps" / "epoch000.npz", stat_entropy=np.ones((layers, 4)), tokens=np.array([["a", "b"]]))
        if bad == "bomb":
            with zipfile.ZipFile(run / "maps" / "epoch001.npz", "w", zipfile.ZIP_DEFLATED) as z:
                with z.open("stat_entropy.npy", "w", force_zip64=True) as f:
                    np.lib.format.write_array(f, np.zeros(50_000_000))  # 400 MB, ~0.4 MB compressed
        else:
            (run / "maps" / "epoch001.npz").write_text("not a zip at all\n")
        s = json.loads((run / "summary.json").read_text())
        s["attention_maps"] = {"dir": str(run / "maps")}
        (run / "summary.json").write_text(json.dumps(s))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert compare_cli([str(tmp_path), f"report={tmp_path / 'report.html'}"]) == 0
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KiB: nothing inflated
    err = [x for x in capsys.readouterr().err.splitlines() if "left out" in x and "epoch001.npz" in x]
    assert len(err) == 2, err
    assert any("'stat_entropy' would take 400,000,128 bytes" in x for x in err), err
    assert any("not an .npz file" in x for x in err), err
    page = (tmp_path / "report.html").read_text()
    assert "Per-head statistics" in page  # epoch000's statistics, the newest readable snapshot
    with pytest.raises(snapshot.SnapshotError, match="not an .npz file"):
        snapshot.read(tmp_path / "layers2" / "maps" / "epoch001.npz")


def test_a_snapshot_whose_weights_disagree_with_its_own_shapes_is_refused(tmp_path):
    import numpy as np

    from attnexp.maps import snapshot

    path = tmp_path / "epoch000.npz"
    np.savez(path, weights=np.zeros((2, 1, 4, 30, 30), np.float16), tokens=np.array([["a"] * 3]),
             stat_entropy=np.ones((2, 4)))
    with pytest.raises(snapshot.SnapshotError, match=r"not the \(layers, examples, heads, tokens, tokens\) = \(2, 1, 4, 3, 3\)"):
        snapshot.read(path)
    np.savez(path, weights=np.zeros((2, 1, 4, 3, 3), np.float16), tokens=np.array([["a"] * 3]), stat_entropy=np.ones((2, 4)))
    assert snapshot.read(path).analysis.scores["entropy"].shape == (2, 4)


def test_runs_whose_losses_mean_different_things_are_ranked_apart(tmp_path, capsys):
    """A next-token loss and a masked-token loss were ranked in one list (the masked one, lower,
    'won'); now each kind is ranked within itself and the table says which each run is ranked with."""
    for attention in ("causal", "bidirectional"):
        ov = [f"attention={attention}", *COMMON]
        train(load_run(compose_cfg(ov, tmp_path / attention)))
    assert compare_cli([str(tmp_path)]) == 0
    rows = table(capsys.readouterr().out)
    assert sorted(r["ranked with"] for r in rows) == ["val/loss · lm · masked", "val/loss · lm · next"]


def test_a_snapshot_of_many_members_each_under_the_limit_is_refused_before_inflating(tmp_path):
    """Before: 1,400 members of 8.38 MB each (every one under the per-member limit) in an 11.7 MB file
    were inflated whole by `compare report=` (11.7 GB, then a MemoryError traceback). Now a snapshot
    has a total limit and a list of the members it may hold; a member `save` never writes is not read."""
    import resource
    import zipfile

    import numpy as np

    from attnexp.maps import snapshot

    path = tmp_path / "epoch000.npz"
    chunk = np.zeros((1_000_000,))  # 8 MB of zeros, a few kB compressed
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        np.lib.format.write_array(z.open("stat_entropy.npy", "w"), np.ones((1, 4)))
        np.lib.format.write_array(z.open("tokens.npy", "w"), np.array([["a", "b"]]))
        for k in range(12):  # members it could have written, together far past any snapshot's small members
            with z.open(f"stat_bomb{k}.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, chunk)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(snapshot.SnapshotError, match=r"small members would take 96,001,\d+ bytes together"):
        snapshot.read(path)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 60_000  # KiB

    strange = tmp_path / "epoch001.npz"
    with zipfile.ZipFile(strange, "w", zipfile.ZIP_DEFLATED) as z:
        np.lib.format.write_array(z.open("stat_entropy.npy", "w"), np.ones((1, 4)))
        for k in range(20):  # members no attnexp writes: never opened, never inflated
            with z.open(f"unknown{k}.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, chunk)
    s = snapshot.read(strange)
    assert set(s.analysis.scores) == {"entropy"}
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 60_000

    many = tmp_path / "epoch002.npz"
    np.savez(many, **{f"stat_q{k}": np.ones((1, 1)) for k in range(snapshot.MAX_MEMBERS + 1)})
    with pytest.raises(snapshot.SnapshotError, match="members; a snapshot holds at most"):
        snapshot.read(many)


def test_compare_reads_every_run_of_an_optuna_study_whichever_worker_ran_it(two_runs, tmp_path, capsys):
    """Workers on several nodes each have their own sweep folder; the study names every trial's run
    folder, so `compare study=NAME storage=URL` puts all of them side by side."""
    optuna = pytest.importorskip("optuna", reason="pip install 'attnexp[sweep]'")
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = optuna.create_study(study_name="shared", storage=url)
    for layers in (1, 2):  # as two launches on two nodes would have told them
        trial = study.ask()
        trial.set_user_attr("run_dir", str(two_runs / f"layers{layers}"))
        trial.set_user_attr("launch", f"node{layers}:1234")
        study.tell(trial, 1.0 / layers)
    assert compare_cli(["study=shared", f"storage={url}"]) == 0
    assert len(table(capsys.readouterr().out)) == 2
    assert compare_cli(["study=nope", f"storage={url}"]) == 2
    assert capsys.readouterr().err.strip() == f"attnexp compare: no study 'nope' in {url}"


def test_a_running_run_whose_process_is_gone_is_counted_killed_apart_from_running():
    """The status column and the group's run counts come from one reading of a run's standing (before,
    the counts parsed the formatted status back with .split(' (') and 'killed' was a bare string)."""
    import os
    import socket
    import subprocess
    import sys

    from attnexp.results.compare import standing, status_counts, status_of
    from attnexp.results.summary import KILLED, Status

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    here = {"host": socket.gethostname(), "metrics": {"history": [{"epoch": 2}]}}
    killed = {**here, "status": "running", "pid": gone.pid}
    live = {**here, "status": "running", "pid": os.getpid()}
    done = {"status": "completed"}
    assert standing(killed) == (KILLED, " (epoch 2)") and status_of(killed) == "killed (epoch 2)"
    assert status_of(live) == "running (epoch 2)" and status_of(done) == "completed"
    assert status_counts([killed, live, done, killed]) == {KILLED: 2, Status.RUNNING: 1, Status.COMPLETED: 1}
