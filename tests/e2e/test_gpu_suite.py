"""The fast path and its measurements: FLOP counts and device peaks for MFU, throughput in every
summary, batch lengths rounded for compiled kernels, torch.compile, and the GPU suite's smoke run
(so it cannot rot between GPU sessions). GPU-only checks carry the `cuda` marker."""

from __future__ import annotations

import json
import subprocess
import sys
import time

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
    parts = {"cuda-tests", "kernels", "model", "overhead", "cross-entropy", "newsgroups", "nanogpt-loop", "text-formation"}
    pretrained = (REPO.parent / "shared" / "models" / "all-MiniLM-L6-v2" / "config.json").is_file()
    assert set(suite["parts"]) == parts | ({"finetune"} if pretrained else set()) and suite["torch"]
    for name in ("kernels_cpu_smoke.json", "model_cpu_smoke.json", "framework_overhead_cpu.json", "cross_entropy_cpu_smoke.json",
                 "newsgroups_cpu_preset.json", "framework_overhead_cpu_nanogpt_smoke.json", "text_formation_cpu_plain.json",
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
                                    cuda_tests_k=None)
    jobs = suite.commands(args, REPO / "out", REPO / "model")
    given = str((REPO / ".gpu_data" / "20newsgroups").resolve())
    for part in ("newsgroups", "nanogpt-loop", "text-formation", "finetune"):
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


def test_one_call_runs_part_groups_side_by_side_into_one_archive(tmp_path, tmp_path_factory):
    """scripts/gpu/call.sh, the prepared call of a GPU window: each group of parts a suite process of
    its own, all at once, merged into one summary and one archive (a call brings back 8 files at most)."""
    import tarfile

    env, tmp = own_tmp(tmp_path_factory)
    env |= {"OUT": str(tmp_path), "PYTHON": sys.executable}
    r = subprocess.run(["bash", "scripts/gpu/call.sh", "cross-entropy", "model", "--", "--smoke"], cwd=REPO,
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert left_behind(tmp) == []  # its part folders are in the archive: the copies outside it go
    with tarfile.open(tmp_path / "window.tgz") as tar:
        names = set(tar.getnames())
        merged = json.load(tar.extractfile("./window/suite.json"))
    assert {"./cross-entropy/cross_entropy_cpu_smoke.json", "./model/model_cpu_smoke.json"} <= names
    assert set(merged["parts"]) == {"cross-entropy", "model"} and "--merge" in merged["made"]["command"]
    r = subprocess.run(["bash", "scripts/gpu/call.sh"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "name the part groups" in r.stderr


@pytest.mark.slow  # ~30 s
def test_a_call_stopped_at_its_limit_brings_back_the_parts_that_finished(tmp_path, tmp_path_factory):
    """The 2026-11-28 (second) window's call ran past its timeout_s and brought back nothing: the archive
    is written at the end. With LIMIT_S (the call's limit) the groups stop 30 s before it, the part that
    was running is killed with what it started, and the finished parts come back in window.tgz."""
    import tarfile

    env, tmp = own_tmp(tmp_path_factory)  # the call's folders, so its processes' command lines, under tmp
    env |= {"OUT": str(tmp_path), "PYTHON": sys.executable, "LIMIT_S": "50"}
    t0 = time.monotonic()
    r = subprocess.run(["timeout", "50", "bash", "scripts/gpu/call.sh", "kernels,nanogpt-loop", "--", "--smoke"],
                       cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
    assert (tmp_path / "window.tgz").is_file(), f"rc {r.returncode}: " + r.stdout[-2000:] + r.stderr[-2000:]
    assert time.monotonic() - t0 < 50 and r.returncode == 1  # a part did not finish: said so, in time
    with tarfile.open(tmp_path / "window.tgz") as tar:
        merged = json.load(tar.extractfile("./window/suite.json"))
    assert merged["parts"]["kernels"]["status"] == "ok" and "nanogpt-loop" not in merged["parts"]
    left = subprocess.run(["pgrep", "-f", f"framework_overhead.py.*{tmp}/"], capture_output=True, text=True)
    assert left.stdout.strip() == "", "the stopped part's processes are still running"
