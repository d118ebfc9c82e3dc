"""The GPU window's plan (scripts/gpu/window.json): which parts run in which call, each with the seconds
it is expected to take; `check_plan` says what keeps a plan from fitting a window, `budgets` what a
self-sizing part may spend. scripts/gpu/suite.py runs a call of it; scripts/gpu/rehearse.py rehearses it."""

from __future__ import annotations

import json
from pathlib import Path

PARTS = ("cuda-tests", "kernels", "model", "overhead", "cross-entropy", "newsgroups", "nanogpt-loop", "text-formation",
         "text-scale", "flex-long", "finetune")
PLAN = Path(__file__).resolve().parent / "window.json"
BUDGETED = {"nanogpt-loop": 30, "text-scale": 15, "flex-long": 30}  # part: seconds of its limit kept back from its budget


def budgets(args) -> dict[str, int]:
    """The seconds each self-sizing part may spend: its `expected_s` in the plan (the call's, else the
    first call that names it) less what it keeps back for starting and ending."""
    plan = getattr(args, "plan_calls", None) or load_plan(PLAN)["calls"]
    expected = {}
    for call in plan:
        for p in call:
            expected.setdefault(p["part"], p["expected_s"])
    return {part: max(10, int(expected.get(part, 240)) - back) for part, back in BUDGETED.items()}


def load_plan(path: Path) -> dict:
    """The window plan, checked (`check_plan`); SystemExit with one line where it does not fit."""
    try:
        plan = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise SystemExit(f"gpu/suite.py: the plan {path} cannot be read ({e}); fix it or give --plan FILE") from None
    problem = check_plan(plan)
    if problem:
        raise SystemExit(f"gpu/suite.py: the plan {path} does not fit: {problem}")
    return plan


def check_plan(plan: dict) -> str | None:
    """What is wrong with a window plan, or None: at most two calls, each a list of {part, expected_s}
    with known parts, each call's work within call_limit_s, and all of it within the window less its
    start, each call's own time and the margin."""
    calls = plan.get("calls") if isinstance(plan, dict) else None
    if not isinstance(calls, list) or not 1 <= len(calls) <= 2:
        return "'calls' must be a list of one or two calls"
    for i, call in enumerate(calls, 1):
        if not isinstance(call, list) or not call:
            return f"call {i} must be a non-empty list of parts"
        for p in call:
            if not isinstance(p, dict) or p.get("part") not in PARTS:
                return f"call {i}: {p!r} is not {{'part': one of {', '.join(PARTS)}, 'expected_s': seconds}}"
            if not isinstance(p.get("expected_s"), int | float) or not 0 < p["expected_s"] <= 600:
                return f"call {i}: {p['part']}'s expected_s must be a number of seconds from 1 to 600"
    try:
        limit = float(plan["call_limit_s"])
        room = float(plan["window_s"]) - float(plan["start_s"]) - len(calls) * float(plan["per_call_s"]) - float(plan["margin_s"])
    except (KeyError, TypeError, ValueError):
        return "window_s, start_s, per_call_s, margin_s and call_limit_s must each be a number"
    sums = [sum(p["expected_s"] for p in call) for call in calls]
    for i, total in enumerate(sums, 1):
        if total > limit:
            return f"call {i}'s parts expect {total:g} s, over the {limit:g} s a call may work; move a part or shorten it"
    if sum(sums) > room:
        return (f"the calls expect {sum(sums):g} s, over the {room:g} s the window leaves (window_s less start_s, "
                f"per_call_s a call and margin_s)")
    return None
