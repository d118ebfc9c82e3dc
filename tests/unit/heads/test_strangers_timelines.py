"""Property-based (issue 52 item 6): generated damaged, truncated, nested, wrongly typed and oversized
versions of a run's maps/timeline.jsonl, and of the maps callback's state in a checkpoint. For each:
a reading or one line (TimelineError / ConfigError naming the file), never another exception, and the
file unchanged by being read. Found by it: a line nested 100,000 deep was a RecursionError traceback
(the timeline's lines were parsed with json.loads, not the one reading rule's loads)."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from attnexp.heads import timeline as tl
from helpers.damaged_lines import JUNK, damage, damaged


def good_lines() -> list[str]:
    rng = np.random.default_rng(0)
    readings = [tl.Reading(s, 0, {"induction": rng.random((2, 2)), "prev_token": rng.random((2, 2))}, 3.0 - s / 100,
                           2.5, -0.1 * s) for s in (0, 5, 10, 20, 40)]
    return [json.dumps({"attnexp_timeline": tl.FORMAT, "layers": 2, "heads": 2}), *(r.line() for r in readings)]


DAMAGE = damage(["step", "epoch", "loss", "icl", "values"], cut=2000)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(how=DAMAGE, where=st.integers(0, 10))
@example(how=("field", ("step", 1)), where=0)  # a well-formed step that keeps the order is a reading (test's oracle)
def test_a_damaged_timeline_is_read_or_refused_in_one_line(tmp_path, how, where):
    path = tmp_path / "timeline.jsonl"
    path.write_text(damaged(good_lines(), how, where, first_record=1), encoding="utf-8", errors="surrogateescape")
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    for reader in (tl.read, lambda p: tl.salvage(p)[0]):
        try:
            t = reader(path)
        except tl.TimelineError as e:
            assert "\n" not in str(e) and str(path) in str(e)
            continue
        v = how[1][1] if how[0] == "field" and how[1][0] == "step" else None
        planted = {v} if isinstance(v, int) and not isinstance(v, bool) else set()  # a whole number planted is a step
        assert list(t.steps) == sorted(t.steps) and {int(s) for s in t.steps} <= {0, 5, 10, 20, 40} | planted
        for r in t.readings:
            assert all(np.isfinite(v).all() and v.shape == (2, 2) for v in r.values.values())
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


@pytest.mark.parametrize("step", [True, 5.7, "5"])
def test_a_step_that_is_not_a_whole_number_is_not_a_reading(tmp_path, step):
    """Found by the property test above: a reading whose step was `true` was read as step 1."""
    path = tmp_path / "timeline.jsonl"
    path.write_text(damaged(good_lines(), ("field", ("step", step)), 1, first_record=1))
    with pytest.raises(tl.TimelineError, match="line 2 is not a reading"):
        tl.read(path)
    assert tl.salvage(path)[0].steps.tolist() == [5, 10, 20, 40]


def test_an_oversized_timeline_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "timeline.jsonl"
    path.write_text("\n".join(good_lines()) + "\n")
    with open(path, "r+b") as f:
        f.truncate(tl.MAX_BYTES + 1)  # sparse: nothing is written, a reader that read it all would hold 256 MB
    with pytest.raises(tl.TimelineError, match="timeline.jsonl"):
        tl.read(path)


@settings(max_examples=200, deadline=None)
@given(state=JUNK | st.fixed_dictionaries({"epochs": JUNK, "timeline_step": JUNK, "last_alignment": JUNK}))
def test_forged_maps_state_is_accepted_only_as_attnexp_writes_it(state):
    from attnexp.config import ConfigError
    from attnexp.training.checkpointing import check_state

    try:
        check_state(state)
    except ConfigError as e:
        assert "\n" not in str(e)
        return
    assert isinstance(state, dict) and isinstance(state["epochs"], list)
    assert all(type(e) is int for e in state["epochs"])
