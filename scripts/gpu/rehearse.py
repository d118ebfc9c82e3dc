"""The GPU window rehearsed on the CPU (`python scripts/gpu/suite.py --rehearse`): every call of the plan
through scripts/gpu/call.sh with tiny sizes (`-- --smoke`), then the plan's first part alone, cut at a limit
shorter than it needs. What it shows, one check a line in <out>/rehearsal.json:

- every part starts (its log is in the call's archive and says so);
- every part writes its result files as it goes (they are in the archive);
- a part killed at its limit still returns what it finished (the cut part's file holds its finished fits);
- the archive comes back whole (it opens, and its suite.json names every part of the call).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# what each part writes on the CPU with --smoke (inside the call's folder), besides its log
WRITES = {"nanogpt-loop": ["nanogpt_loop_cpu_smoke.json"], "text-scale": ["text_scale_cpu.json", "text_scale_timelines/"],
          "flex-long": ["kernels_cpu_long_smoke.json"], "cuda-tests": [],
          "kernels": ["kernels_cpu_smoke.json"], "model": ["model_cpu_smoke.json"],
          "cross-entropy": ["cross_entropy_cpu_smoke.json"],
          "overhead": ["framework_overhead_cpu.json"], "newsgroups": ["newsgroups_cpu_preset.json"],
          "text-formation": ["text_formation_cpu_plain.json"], "finetune": ["finetune_choice_cpu_smoke.json"]}
CUT_S = 35  # the cut call's work: past the first part's first fits, short of its 100 repeats


def call(n: int, plan: Path, out: Path, *extra: str, limit_s: int | None = None) -> tuple[subprocess.CompletedProcess,
                                                                                          dict[str, bytes]]:
    """call.sh N with --smoke (under LIMIT_S=`limit_s`, the call's timeout_s, where given), its archive read
    back: (the process, member name -> bytes of each file)."""
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OUT": str(out), "PLAN": str(plan), "PYTHON": sys.executable,
           **({"LIMIT_S": str(limit_s)} if limit_s else {})}
    done = subprocess.run(["bash", "scripts/gpu/call.sh", str(n), "--", "--smoke", *extra], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    files = {}
    try:
        with tarfile.open(out / "window.tgz") as tar:
            for m in tar.getmembers():
                f = tar.extractfile(m) if m.isfile() else None
                files[m.name.split("/", 1)[-1] + ("/" if m.isdir() else "")] = f.read() if f else b""
    except (OSError, tarfile.TarError) as e:
        files = {"!": str(e).encode()}
    return done, files


def check_call(n: int, parts: list[str], done, files: dict[str, bytes]) -> list[dict]:
    """One check a line: the archive whole, and each part started, finished, and wrote its files."""
    checks = [{"call": n, "check": "the archive comes back whole", "ok": "suite.json" in files,
               "seen": sorted(files)[:40] if "suite.json" not in files else f"{len(files)} members"}]
    suite = json.loads(files.get("suite.json") or b"{}")
    for part in parts:
        log = (suite.get("parts", {}).get(part) or {}).get("log")
        checks.append({"call": n, "part": part, "check": "starts: its log is in the archive",
                       "ok": bool(log) and bool(files.get(log))})
        checks.append({"call": n, "part": part, "check": "ends within its limit",
                       "ok": suite.get("parts", {}).get(part, {}).get("status") == "ok",
                       "seen": suite.get("parts", {}).get(part, {}).get("status")})
        for name in WRITES[part]:
            checks.append({"call": n, "part": part, "check": f"writes {name}", "ok": name in files})
    if done.returncode != 0:
        checks.append({"call": n, "check": "call.sh exits 0", "ok": False, "seen": (done.stdout + done.stderr)[-1500:]})
    return checks


def check_cut(plan: dict, plan_path: Path, out: Path) -> list[dict]:
    """Call 1 again, its first part asked for 100 repeats, under a call limit that leaves it CUT_S seconds
    of work (as a window's call that ran past its timeout_s): stopped, its finished fits kept."""
    first = plan["calls"][0][0]["part"]
    done, files = call(1, plan_path.resolve(), out / "cut", "--nanogpt-repeats=100", limit_s=CUT_S + 20)
    suite = json.loads(files.get("suite.json") or b"{}")
    kept = json.loads(files.get(WRITES[first][0]) or b"{}") if WRITES[first] else {}
    arms = kept.get("arms", {})
    finished = sum(len(a.get("fits", [])) + (a.get("warmup") is not None) for a in arms.values())
    return [{"call": "cut", "part": first, "check": f"stopped at the call's limit ({CUT_S} s of work)",
             "ok": suite.get("running") == first and first not in suite.get("parts", {}), "seen": suite.get("running")},
            {"call": "cut", "part": first, "check": "returns its finished fits", "ok": finished >= 1,
             "seen": f"{finished} fits (warm-ups included) of {len(arms)} arms"},
            {"call": "cut", "part": first, "check": "its log comes back", "ok": bool(files.get("nanogpt_loop.log"))},
            {"call": "cut", "check": "the archive comes back whole", "ok": "suite.json" in files},
            {"call": "cut", "check": "call.sh says the call failed", "ok": done.returncode != 0, "seen": done.returncode}]


def rehearse(plan_path: Path, out: Path | None) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from plan import load_plan

    plan = load_plan(plan_path)
    out = (out or Path(tempfile.mkdtemp(prefix="gpu-rehearsal-"))).resolve()
    checks = []
    for n, parts in enumerate(plan["calls"], 1):
        done, files = call(n, plan_path.resolve(), out / f"call{n}")
        checks += check_call(n, [p["part"] for p in parts], done, files)
    checks += check_cut(plan, plan_path, out)
    (out / "rehearsal.json").write_text(json.dumps({"plan": str(plan_path), "checks": checks}, indent=2) + "\n")
    failed = [c for c in checks if not c["ok"]]
    for c in checks:
        print(f"{'ok  ' if c['ok'] else 'FAIL'} call {c['call']} {c.get('part', '')}: {c['check']}"
              + (f" ({c['seen']})" if not c["ok"] and "seen" in c else ""))
    print(f"gpu/suite.py --rehearse: {len(checks) - len(failed)} of {len(checks)} checks hold; {out / 'rehearsal.json'}")
    if failed:
        raise SystemExit(1)
