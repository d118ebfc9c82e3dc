"""The fast path and its measurements: FLOP counts and device peaks for MFU, throughput in every
summary, batch lengths rounded for compiled kernels, torch.compile, and the GPU suite's smoke run
(so it cannot rot between GPU sessions). GPU-only checks carry the `cuda` marker."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from helpers.runs import REPO, left_behind, own_tmp

CUDA = torch.cuda.is_available()
TINY = ["trainer.max_epochs=1", "data.n_sentences=300", "logger=none", "maps.enabled=false", "test=false"]


@pytest.mark.slow  # ~2.5 minutes of subprocesses: the largest single test of the default set before
def test_gpu_suite_smoke_runs_every_part(tmp_path, tmp_path_factory):
    env, tmp = own_tmp(tmp_path_factory)
    r = subprocess.run([sys.executable, "scripts/gpu/suite.py", "--smoke", f"--out={tmp_path}"], cwd=REPO,
                       capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    # the runs a part trains to read its figures are removed: each CI call kept 1.8 GB of them in /tmp until
    # the disk was full. Each part has a temporary folder of its own, which says what the part left there.
    assert left_behind(tmp) == []
    suite = json.loads((tmp_path / "suite.json").read_text())
    runs = {n: r for n, r in suite["parts"].items() if "status" in r}
    runs |= {f"newsgroups {t}": r for t, r in suite["parts"].get("newsgroups", {}).items()}
    assert {n: r["left_behind"] for n, r in runs.items() if r["left_behind"]} == {}
    parts = {"cuda-tests", "kernels", "model", "overhead", "cross-entropy", "newsgroups", "nanogpt-loop", "text-formation",
             "text-scale", "flex-long"}
    pretrained = (REPO.parent / "shared" / "models" / "all-MiniLM-L6-v2" / "config.json").is_file()
    assert set(suite["parts"]) == parts | ({"finetune"} if pretrained else set()) and suite["torch"]
    for name in ("kernels_cpu_smoke.json", "model_cpu_smoke.json", "framework_overhead_cpu.json", "cross_entropy_cpu_smoke.json",
                 "newsgroups_cpu_preset.json", "nanogpt_loop_cpu_smoke.json", "text_formation_cpu_plain.json",
                 "text_scale_cpu.json", "kernels_cpu_long_smoke.json",
                 "suite.md", *(["finetune_choice_cpu_smoke.json"] if pretrained else [])):
        assert (tmp_path / name).is_file(), name
    if pretrained:  # the candidates on raw posts, the best on validation the one tested, raw and cleaned
        choice = json.loads((tmp_path / "finetune_choice_cpu_smoke.json").read_text())
        vals = [c["best_val_acc"] for c in choice["candidates"]]
        assert len(vals) == 3 and choice["chosen"]["raw"]["candidate"] == choice["candidates"][vals.index(max(vals))]["candidate"]
        assert {t: 0 <= r["test_acc"] <= 1 for t, r in choice["chosen"].items()} == {"raw": True, "clean": True}
        # the chosen setting again with another seed (smoke: one more; the GPU part two), each tested
        assert [r["seed"] for r in choice["seeds"]][1:] == [1] and len(choice["verdict_raw"]["test_acc"]) == 2
    ce = json.loads((tmp_path / "cross_entropy_cpu_smoke.json").read_text())
    assert ce["same"]["hits_equal"] and ce["same"]["loss_rel_diff"] < 1e-5 and ce["chunked_vs_full_time"] > 0
    overhead = json.loads((tmp_path / "framework_overhead_cpu.json").read_text())
    assert set(overhead["profile"]) == {"lean"}, overhead.get("profile")  # the smoke profiles attnexp's arm only
    assert all(p["steps"] >= 1 and p["top_host_ops"] for p in overhead["profile"].values())
    model = json.loads((tmp_path / "model_cpu_smoke.json").read_text())["results"]
    assert {r["arm"] for r in model} == {"attnexp", "nanogpt"} and model[0]["vs_nanogpt"] > 0
    rows = json.loads((tmp_path / "kernels_cpu_smoke.json").read_text())["results"]
    assert all(isinstance(r["ours_ms"], float) and r["ours_vs_bare"] > 0 for r in rows)


def test_each_gpu_window_writes_into_a_folder_of_its_own(monkeypatch):
    """Issues 54 and 55: the first window's figures survived only in git history, the next one having
    written over scripts/results/gpu/. The default folder now carries the window's date and device."""
    sys.path.insert(0, str(REPO / "scripts" / "gpu"))
    import suite

    monkeypatch.setattr(suite.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(suite.torch.cuda, "get_device_name", lambda i=0: "NVIDIA H100 80GB HBM3")
    h100 = suite.default_out(smoke=False)
    monkeypatch.setattr(suite.torch.cuda, "get_device_name", lambda i=0: "NVIDIA H200")
    h200 = suite.default_out(smoke=False)
    assert h100.parent == h200.parent == REPO / "scripts" / "results" / "gpu" and h100 != h200
    assert h100.name.endswith("_nvidia-h100-80gb-hbm3") and h100.name[:4].isdigit()


@pytest.mark.parametrize("smoke", [False, True])
def test_every_part_that_reads_20_newsgroups_reads_the_given_copy(smoke):
    """On a lent GPU machine ../shared is absent: the data travels in .gpu_data/ and --newsgroups-path
    names it. text-formation and nanogpt-loop (data=text) ignored it and read data.path's default,
    so on that machine they would have failed before their first step."""
    sys.path.insert(0, str(REPO / "scripts" / "gpu"))
    import suite

    args = suite.argparse.Namespace(smoke=smoke, newsgroups_path=".gpu_data/20newsgroups", newsgroups_settings="raw",
                                    newsgroups_minutes=1.5, newsgroups_tags="preset", finetune_minutes=1.0,
                                    kernels_budget_s=80, kernels_backends=None, overhead_arms="plain,bare",
                                    cuda_tests_k=None, nanogpt_repeats=None)
    jobs = suite.commands(args, REPO / "out", REPO / "model")
    given = str((REPO / ".gpu_data" / "20newsgroups").resolve())
    for part in ("newsgroups", "nanogpt-loop", "text-formation", "text-scale", "finetune"):
        for _, cmd, _, _ in jobs[part]:
            assert f"data.path={given}" in cmd or f"--data={given}" in cmd, (part, cmd)


def test_suite_processes_run_at_once_merge_into_one_windows_summary(tmp_path):
    """Parts run as separate suite processes on one GPU (each its own --out) become one suite.json
    with every part and how the merged file was made; folders from two devices are refused."""
    for name, part, device in (("a", "cuda-tests", "NVIDIA H200"), ("b", "text-formation", "NVIDIA H200"),
                               ("c", "finetune", "NVIDIA H100 80GB HBM3")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "suite.json").write_text(json.dumps(
            {"device": device, "torch": "2.11.0+cu130", "cuda": "13.0", "driver": "580", "python": "3.12.3",
             "date": f"2026-11-28T02:2{int(name == 'b')}:00", "smoke": False, "parts": {part: {"status": "ok", "seconds": 1.0}}}))
    merge = [sys.executable, "scripts/gpu/suite.py", "--out", str(tmp_path / "w"), "--merge"]
    r = subprocess.run([*merge, str(tmp_path / "a"), str(tmp_path / "b")], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    suite = json.loads((tmp_path / "w" / "suite.json").read_text())
    assert list(suite["parts"]) == ["cuda-tests", "text-formation"] and suite["date"] == "2026-11-28T02:20:00"
    assert "--merge" in suite["made"]["command"] and suite["made"]["libraries"]["torch"]
    r = subprocess.run([*merge, str(tmp_path / "a"), str(tmp_path / "c")], cwd=REPO, capture_output=True, text=True)
    assert r.returncode != 0 and "different devices" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_the_window_plan_rehearsed_on_the_cpu_through_call_sh(tmp_path, tmp_path_factory):
    """Issue 65: the window's plan (scripts/gpu/window.json), every call through scripts/gpu/call.sh with
    tiny sizes, then call 1 stopped at a limit that cuts its first part: every part starts and writes its
    files, the cut part returns its finished fits, and each archive comes back whole. The fifth window's
    first call ran past its limit and brought back nothing."""
    env, tmp = own_tmp(tmp_path_factory)
    r = subprocess.run([sys.executable, "scripts/gpu/suite.py", "--rehearse", f"--out={tmp_path}"], cwd=REPO,
                       capture_output=True, text=True, timeout=900, env=env)
    checks = json.loads((tmp_path / "rehearsal.json").read_text())["checks"]
    assert r.returncode == 0 and all(c["ok"] for c in checks), r.stdout[-4000:] + r.stderr[-2000:]
    plan = json.loads((REPO / "scripts" / "gpu" / "window.json").read_text())
    started = {c["part"] for c in checks if c["check"].startswith("starts")}
    assert started == {p["part"] for call in plan["calls"] for p in call}
    assert any(c["call"] == "cut" and c["check"] == "returns its finished fits" for c in checks)
    assert left_behind(tmp) == []


def test_the_plan_runs_the_issues_parts_in_priority_order_within_a_window():
    """nanogpt-loop, then plain text at scale, the long flex rows and the CUDA tests; each expected
    duration says which earlier window's record it comes from; the plan fits."""
    sys.path.insert(0, str(REPO / "scripts" / "gpu"))
    import suite

    plan = json.loads((REPO / "scripts" / "gpu" / "window.json").read_text())
    parts = [p for call in plan["calls"] for p in call]
    assert [p["part"] for p in parts] == ["nanogpt-loop", "text-scale", "flex-long", "cuda-tests"]
    assert all(p.get("from") for p in parts) and suite.check_plan(plan) is None
    assert all(sum(p["expected_s"] for p in call) <= 480 for call in plan["calls"]) and len(plan["calls"]) <= 2


@pytest.mark.parametrize("change, said", [
    (lambda p: p["calls"][0].append({"part": "cuda-tests", "expected_s": 60}), "over the 480 s a call may work"),
    (lambda p: p["calls"].append([{"part": "kernels", "expected_s": 10}]), "one or two calls"),
    (lambda p: p["calls"][1].append({"part": "kernels", "expected_s": 300}), "over the 720 s the window leaves"),
    (lambda p: p["calls"][1].append({"part": "warp-drive", "expected_s": 10}), "'part': one of"),
    (lambda p: p["calls"][1].append({"part": "kernels", "expected_s": "soon"}), "expected_s must be a number"),
])
def test_a_plan_that_does_not_fit_is_refused_in_one_line_before_anything_runs(tmp_path, change, said):
    plan = json.loads((REPO / "scripts" / "gpu" / "window.json").read_text())
    change(plan)
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    r = subprocess.run(["bash", "scripts/gpu/call.sh", "1", "--", "--smoke"], cwd=REPO, capture_output=True, text=True,
                       timeout=120, env={**os.environ, "PLAN": str(tmp_path / "plan.json"), "OUT": str(tmp_path),
                                         "PYTHON": sys.executable})
    assert r.returncode == 2 and said in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "window.tgz").exists()
    r = subprocess.run(["bash", "scripts/gpu/call.sh"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "name the plan's call" in r.stderr


@pytest.mark.slow  # ~20 s, and it asks PyPI for the wheels
def test_the_staged_wheels_data_and_model_fit_what_a_call_carries():
    """scripts/gpu/wheels.sh stages what the GPU machine lacks: wheels for its Python 3.12 (pure or cp312,
    manylinux x86_64), 20 Newsgroups as Parquet, the pretrained model in float16. What the plan's calls
    carry (the tracked tree, the wheels, the data; the model where a call fine-tunes) fits 64 MiB."""
    r = subprocess.run(["bash", "scripts/gpu/wheels.sh"], cwd=REPO, capture_output=True, text=True, timeout=900,
                       env={**os.environ, "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    wheels = sorted((REPO / ".whl").glob("*.whl"))
    names = {w.name.split("-")[0].lower().replace("_", "-") for w in wheels}
    assert {"hydra-core", "omegaconf", "antlr4-python3-runtime", "datasets", "python-dotenv", "ruptures",
            "pytest-xdist"} <= names, names
    for w in wheels:
        py, abi, platform = w.stem.split("-")[-3:]
        assert set(py.split(".")) & {"py3", "cp312", "py312"} and abi in ("none", "abi3", "cp312"), w.name
        assert platform == "any" or ("manylinux" in platform and platform.endswith("x86_64")), w.name
    data = REPO / ".gpu_data"
    assert {p.name for p in (data / "20newsgroups").iterdir()} == {"train.parquet", "test.parquet"}

    def size(paths) -> int:
        return sum(p.stat().st_size for p in paths if p.is_file())

    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    carried = size(REPO / f for f in tracked.split("\0") if f) + size(wheels) + size((data / "20newsgroups").iterdir())
    plan = json.loads((REPO / "scripts" / "gpu" / "window.json").read_text())
    if any(p["part"] == "finetune" for call in plan["calls"] for p in call):
        carried += size((data / "all-MiniLM-L6-v2").iterdir())
    if (REPO.parent / "shared" / "models" / "all-MiniLM-L6-v2" / "model.safetensors").is_file():
        assert (data / "all-MiniLM-L6-v2" / "model.safetensors").stat().st_size < 48 * 2**20  # float16 weights
    assert carried <= 64 * 2**20, f"{carried / 2**20:.1f} MiB"
