"""The pages attnexp writes hold data from strangers (a run folder's name, a checkpoint's
vocabulary, a summary.json's fields): opened in a real browser, none of it becomes markup or
script, and the page still draws."""

from __future__ import annotations

import json
import re
import tempfile

import numpy as np
import pytest

from attnexp.maps.html import write_viewer
from helpers.browser import PAYLOAD, dump_dom, injected, needs_chromium
from helpers.runs import left_behind

pytestmark = needs_chromium


def diagonal(n: int) -> np.ndarray:
    w = np.zeros((1, 1, 2, n, n), dtype=np.float32)
    w[..., np.arange(n), np.arange(n)] = 1.0
    return w


def test_a_title_holding_the_data_placeholder_and_markup_stays_text(tmp_path, monkeypatch):
    title = f"run__DATA__{PAYLOAD}</title></h2>__TITLE__"
    page = tmp_path / "viewer.html"
    write_viewer(page, [(0, diagonal(4))], [["[BOS]", "a", "b", "[EOS]"]], 64, title=title)
    tmp = tmp_path / "t"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    dom = dump_dom(page)
    assert left_behind(tmp) == []  # the browser's profile (2.2 MB) was left in /tmp by every page a test opened
    assert 'data-rendered="yes"' in dom, dom[-600:]
    assert not injected(dom)
    assert "<h2>Attention maps: run__DATA__&lt;img src=x" in dom  # the title, shown as text
    assert "<title>attnexp maps: run__DATA__&lt;img src=x" in dom


@pytest.mark.parametrize("token", [f"</script>{PAYLOAD}", "<!--<script>", "<!--", "</SCRIPT >", "a\u2028b"])
def test_tokens_that_look_like_markup_stay_text_in_the_viewer(token, tmp_path):
    page = tmp_path / "viewer.html"
    tokens = ["[BOS]", token, "b", "[EOS]"]
    write_viewer(page, [(0, diagonal(4))], [tokens], 64, title="t")
    dom = dump_dom(page, "view=text&token=1")
    assert 'data-rendered="yes"' in dom, f"the page never drew: {dom[-600:]}"
    assert not injected(dom)


def test_the_viewer_of_a_run_in_a_folder_named_like_markup_runs_nothing(tmp_path):
    from attnexp.api import train
    from helpers.runs import run_of

    out = tmp_path / f"run__DATA__{PAYLOAD}"
    s = train(run_of(["trainer.max_epochs=1", "data.n_sentences=200", "logger=none", "maps.n_examples=1",
                      "trainer.enable_progress_bar=false"], out))
    dom = dump_dom(out / "maps" / "viewer.html")
    assert s["status"] == "completed" and 'data-rendered="yes"' in dom and not injected(dom)


def test_bertviz_pages_keep_a_hostile_vocabulary_as_text(tmp_path):
    pytest.importorskip("bertviz")
    from attnexp.heads.probe import Probe
    from attnexp.maps import bertviz_export

    tokens = ["[CLS]", f"</script>{PAYLOAD}", "<!--<script>", "[SEP]"]
    w = np.full((1, 1, 2, 4, 4), 0.25, dtype=np.float32)
    paths = bertviz_export.write(tmp_path, w, Probe([[0, 1, 2, 3]], [tokens]))
    for path in paths:
        dom = dump_dom(path)
        assert not injected(dom), path.name
        assert "<svg" in dom, f"bertviz did not draw {path.name}: {dom[-400:]}"


def test_report_links_are_file_paths_whatever_a_summary_says(tmp_path, monkeypatch):
    from attnexp.cli.compare import compare_cli

    for name in ("good", "bad"):
        run = tmp_path / "runs" / name
        run.mkdir(parents=True)
        maps_dir = "javascript:document.body.dataset.pwned='yes'//x" if name == "bad" else str(run / "maps")
        (run / maps_dir).mkdir(parents=True, exist_ok=True)  # a relative folder named like a script URL
        (run / maps_dir / "viewer.html").write_text("<html></html>")
        summary = {"schema": 4, "status": "completed", "error": None, "run_dir": str(run), "overrides": [f"seed={len(name)}"],
                   "metrics": {"final": {}, "test": {}, "history": [], "best": {"monitor": "val/loss", "value": 1.0}},
                   "attention_maps": {"dir": maps_dir}}
        (run / "summary.json").write_text(json.dumps(summary))
    here = tmp_path / "runs" / "bad"
    monkeypatch.chdir(here)  # the bad run's relative maps folder resolves from here, beside the report
    assert compare_cli([str(tmp_path / "runs"), f"report={here / 'report.html'}"]) == 0
    page = (here / "report.html").read_text()
    hrefs = re.findall(r'<a href="([^"]*)">viewer</a>', page)
    assert len(hrefs) == 2 and all(h.startswith(("./", "../", "file:")) for h in hrefs), hrefs
    assert not injected(dump_dom(here / "report.html"))


def test_the_text_view_leaves_out_the_keys_a_causal_query_cannot_see(tmp_path):
    n = 6
    w = np.tril(np.ones((n, n), dtype=np.float32))
    w /= w.sum(-1, keepdims=True)
    page = tmp_path / "viewer.html"
    write_viewer(page, [(0, w[None, None, None].repeat(2, 2))], [[f"t{i}" for i in range(n)]], 64, title="causal")
    hover = dump_dom(page, "view=text&token=0").split('id="hover">', 1)[1].split("</div>", 1)[0]
    assert "t0 (0) attends most to: t0 (0) 1.00" in hover and "t1" not in hover, hover
    hover = dump_dom(page, "view=text&token=2").split('id="hover">', 1)[1].split("</div>", 1)[0]
    assert all(f"t{k}" in hover for k in range(3)) and "t3" not in hover and "0.00" not in hover, hover


def test_roles_class_names_and_relevance_from_strangers_stay_text_in_every_analysis_view(tmp_path):
    from attnexp.heads.analysis import Analysis

    n = 4
    w = diagonal(n)
    a = Analysis(scores={"prev_token": np.zeros((1, 2)), "importance": np.array([[0.3, 0.0]])},
                 roles=np.array([[f"self{PAYLOAD}", "broad"]]), layer_importance=np.array([0.5]),
                 rollout=[np.eye(n)],
                 relevance=[{"pred": 1, "pred_scores": np.array([0, 0.2, 1.0, 0]), "true": 0, "true_scores": np.zeros(n)}],
                 skipped={"flow": f"a reason {PAYLOAD}"})
    page = tmp_path / "viewer.html"
    write_viewer(page, [(0, w, a)], [["[CLS]", "a", "b", "[SEP]"]], 64, title="t",
                 class_names=[f"</script>{PAYLOAD}", f"sci.{PAYLOAD}"])
    for view in ("relevance", "rollout", "grid", "text"):
        dom = dump_dom(page, f"view={view}")
        assert 'data-rendered="yes"' in dom, f"{view}: the page never drew: {dom[-600:]}"
        assert not injected(dom), view
        assert "heads carrying 90% of the importance: 1 of 2" in dom, view
        assert "a reason &lt;img src=x" in dom, view  # why flow is absent, as text
        assert "H0 · self&lt;img src=x" in dom, view  # the role, in the head menu, as text
    assert "L0 H0 · self&lt;img src=x" in dump_dom(page, "view=grid")  # and in the grid's captions
    dom = dump_dom(page, "view=relevance")
    assert "relevance to class sci.&lt;img src=x" in dom  # the predicted class's name, as text
