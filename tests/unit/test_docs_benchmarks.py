"""The benchmark figures the docs quote (docs/benchmarks.md, docs/gpu.md and the pages they feed) are
read from the files scripts/bench/ and scripts/gpu/ wrote: what the maps cost, the chunked
cross-entropy, batches and nanoGPT's loop, each GPU window's files, start-up. A rerun that changes a
number fails here until the page says the new one (test_docs_figures.py holds the studies' figures)."""

from __future__ import annotations

import re

from helpers.runs import REPO


def test_the_maps_cost_quoted_is_the_benchmarks_files():
    """docs/maps.md's cost of the maps at the defaults: the training thread's share from --parts, and
    the whole runs' medians against maps off, with the pictures on their thread and on the training one."""
    import json

    res = REPO / "scripts" / "results"
    parts = json.loads((res / "maps_parts_cpu_background.json").read_text())
    assert parts["overrides"] == ["maps.importance=false"]  # the defaults (--parts alone turns importance on)
    share = parts["tasks"]["lm"]["pct_of_fit"]["training thread, all of it"]
    runs = json.loads((res / "maps_overhead_cpu_background.json").read_text())
    assert runs["repeats"] == 5
    over = runs["overhead_pct_vs_off"]
    page = " ".join((REPO / "docs" / "maps.md").read_text().split())
    assert f"the training thread for {share:.1f}% of the default run's fit time" in page and share <= 5
    default, fore = over["lm-default"], over["lm-foreground"]
    assert f"{default['train_time_s']:+.1f}% fit time and {default['wall_time_s']:+.1f}% wall time" in page
    assert f"{fore['train_time_s']:+.1f}% / {fore['wall_time_s']:+.1f}% with the pictures drawn on the training thread" in page


def test_the_cross_entropy_figures_quoted_are_the_benchmarks_file():
    """docs/benchmarks.md's reason for not chunking the loss is cross_entropy.py's file, measured with
    the same loss and gradients in both arms."""
    import json

    d = json.loads((REPO / "scripts" / "results" / "cross_entropy_cpu.json").read_text())
    assert d["same"]["hits_equal"] and d["same"]["loss_rel_diff"] < 1e-6 and (d["vocab"], d["tokens"]) == (50257, 4096)
    page = " ".join((REPO / "docs" / "benchmarks.md").read_text().split())
    said = f"{d['chunked_vs_full_time']:.2f}x the time for {d['chunked_vs_full_memory']:.2f}x the memory"
    assert page.count(said) == 2 and d["chunked_vs_full_time"] > 1


def test_the_batch_and_nanogpt_loop_figures_quoted_are_the_benchmarks_files():
    """docs/benchmarks.md's batch costs and its comparison with nanoGPT's own loop (issue 54) are the files."""
    import json

    res = REPO / "scripts" / "results"
    page = " ".join((REPO / "docs" / "benchmarks.md").read_text().split())
    for r in json.loads((res / "batches_cpu.json").read_text())["results"]:
        data = r["data"].replace("<=", "≤")
        assert (f"| {data} | {r['collator us']} µs | {r['table us']} µs | {r['ratio']}x | {r['collator cpu us']} µs | "
                f"{r['table cpu us']} µs | {r['cpu ratio']}x |") in page, data
    for name, label in (("framework_overhead_cpu_nanogpt_loop_tiny.json", "d 64, 2 layers, T 64, batch 16"),
                        ("framework_overhead_cpu_nanogpt_loop.json", "d 128, 4 layers, T 128, batch 16")):
        med = json.loads((res / name).read_text())["median"]
        base = med["nanogpt"]["step_ms"]
        row = (f"| {label} | {1000 * base:,.0f} µs | {med['lean']['step_ms'] / base:.3f}x | "
               f"{med['default']['step_ms'] / base:.3f}x |")
        assert row in page, row
        assert med["lean"]["step_ms"] / base <= 1.05  # the target on the CPU


def test_the_gpu_windows_figures_quoted_are_their_own_folders_files():
    """docs/gpu.md quoted the first GPU window's figures (27% / 31% MFU, +19%) from files the second
    window had written over (issue 55): each window now has a folder of its own under
    scripts/results/gpu/, and each figure of the page's first paragraph is computed here from it."""
    import json
    import statistics

    gpu = REPO / "scripts" / "results" / "gpu"
    page = " ".join((REPO / "docs" / "gpu.md").read_text().split())
    first, second = gpu / "2026-11-24_h100", gpu / "2026-11-26_h100"
    load = lambda folder, name: json.loads((folder / name).read_text())  # noqa: E731
    kernels = load(first, "kernels_cuda.json")
    sdpa = [r for r in kernels["results"] if r["backend"] == "sdpa"]
    at_4096 = {r["head_dim"]: r["bare_tflops"] / kernels["peak_tflops"] for r in sdpa
               if r["T"] == 4096 and r["mask"] == "causal" and r["variant"] == "mha"}
    mfu = {r["compile"]: r["mfu"] for r in load(first, "model_cuda.json")["results"] if r["model"] == "gpt2-small"}
    lean = load(first, "framework_overhead_gpu_gpt2.json")["median"]
    news = load(first, "newsgroups_gpu_preset.json")["settings"]["raw"]
    model2 = [r for r in load(second, "model_cuda.json")["results"] if r["arm"] == "attnexp"]
    over2 = load(second, "framework_overhead_gpu_gpt2.json")
    busy = [a["gpu_busy_pct"] for a in over2["profile"].values()]
    quoted = [f"median {statistics.median(r['ours_vs_bare'] for r in sdpa):.3f}x a bare SDPA call",
              f"at {at_4096[64]:.0%} (head dim 64) and {at_4096[128]:.0%} (128)",
              f"GPT-2-small at {mfu[False]:.0%} MFU, {mfu[True]:.0%} compiled",
              f"the framework +{lean['lean']['step_ms'] / lean['plain']['step_ms'] - 1:.0%} a step over the plain loop",
              f"from scratch {news['test_acc']:.3f} in {news['train_time_s']:.0f} s of training",
              *(f"{r['vs_nanogpt']:.3f}x {'compiled' if r['compile'] else 'eager'}" for r in model2),
              f"({max(r['mfu'] for r in model2):.1%} MFU",
              f"{over2['ratios']['default_vs_bare']['step_ms']:.3f}x bare Lightning and "
              f"{over2['ratios']['default_vs_plain']['step_ms']:.3f}x the plain loop",
              f"the GPU {min(busy):.0f}–{max(busy):.0f}% busy"]
    last = (gpu / "2026-11-28_nvidia-h200" / "cuda-tests.log").read_text().strip().splitlines()[-1]
    passed, skipped = (int(re.search(rf"(\d+) {w}", last).group(1)) for w in ("passed", "skipped"))
    assert "failed" not in last and "error" not in last
    quoted.append(f"the CUDA tests passed ({passed}, {skipped} skipped")
    for q in quoted:
        assert q in page, q


def test_the_start_up_figures_quoted_are_the_benchmarks_files():
    """docs/benchmarks.md's start-up: the default install's median (startup_cpu.json) and the start-up
    with one composition fewer against the commit before it, measured together, and the composition
    removed (scripts/bench/startup.py --against: startup_cpu_against.json)."""
    import json
    import statistics

    results = REPO / "scripts" / "results"
    text = " ".join((REPO / "docs" / "benchmarks.md").read_text().split())
    assert f"**{json.loads((results / 'startup_cpu.json').read_text())['median_startup_s']:.2f} s**" in text
    ab = json.loads((results / "startup_cpu_against.json").read_text())
    rev, this = ab["against"], ab["median_startup_s"]["this"]
    quoted = (f"a median of {this:.2f} s against {ab['median_startup_s'][rev]:.2f} s for the commit before, the two "
              f"arms taking turns in one run, {len(ab['startup_s']['this'])} starts each (`--against {rev}`), a ratio "
              f"of {ab['ratio_this_to_against']:.3f}")
    assert quoted in text
    assert f"costs {statistics.median(ab['get_mode_s']):.3f} s warm" in text
    assert f"`python scripts/bench/startup.py --repeats {len(ab['startup_s'][rev])} --against {rev}`" in text
