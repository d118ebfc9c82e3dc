"""What the scripts share: where results go, one writer of a result file (`{meta, results}` JSON
beside a markdown table) and one markdown table, a scratch folder for a script's runs, and one
headless-Chromium screenshot. A script in
scripts/bench/, scripts/studies/ or scripts/gpu/ imports it after `sys.path.insert(0, SCRIPTS)`."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "scripts" / "results"


def markdown_table(rows: Sequence[dict | Sequence], columns: Sequence[str]) -> str:
    """A markdown table: a row is a dict (its values under `columns`, "" where missing) or a sequence
    of cells; a `|` inside a cell is escaped."""
    def cell(v) -> str:
        return str("" if v is None else v).replace("|", "\\|")

    cells = [[r.get(c, "") for c in columns] if isinstance(r, dict) else list(r) for r in rows]
    return "\n".join(["| " + " | ".join(columns) + " |", "| " + " | ".join("---" for _ in columns) + " |",
                      *("| " + " | ".join(map(cell, r)) + " |" for r in cells)])


def provenance(runs: Iterable[Path | str] = (), read_here: Sequence[str] = ()) -> dict:
    """How a result file was made: the command, the code's commit (and whether the tree had changes),
    the libraries, the device, the threads and cores, the date. Every result file carries it as `made`.
    A file quoting the test split says which calls scored it (`test_reads`): each run's own record of
    its test reads (attnexp.results.test_reads) for the run folders, checkpoints and sweep folders in
    `runs`, and under "this process" what the script scored itself (`read_here`, e.g. a baseline)."""
    import os
    import platform
    import sys
    from datetime import datetime
    from importlib.metadata import PackageNotFoundError, version

    import torch

    def git(*args: str) -> str | None:
        try:
            r = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=10)
        except OSError:
            return None
        return r.stdout.strip() if r.returncode == 0 else None

    def ver(pkg: str) -> str | None:
        try:
            return version(pkg)
        except PackageNotFoundError:
            return None

    status = git("status", "--porcelain", "--untracked-files=no")
    from attnexp.config.secrets import hide_password

    return {"command": hide_password(" ".join(["python", *sys.argv])), "commit": git("rev-parse", "--short", "HEAD"),
            "tree_changed": None if status is None else bool(status), "python": platform.python_version(),
            "libraries": {p: ver(p) for p in ("torch", "lightning", "hydra-core", "optuna", "numpy", "attnexp")},
            "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"cpu ({platform.machine()})",
            "threads": torch.get_num_threads(), "cores": os.cpu_count(), "date": datetime.now().isoformat(timespec="seconds"),
            **({"test_reads": {**test_reads(runs), **({"this process": list(read_here)} if read_here else {})}}
               if runs or read_here else {})}


def test_reads(places: Iterable[Path | str]) -> dict[str, list[dict]]:
    """{run folder: the reads of its test split it records} for every run folder in `places` (a run
    folder, a checkpoint in one, or a sweep folder with runs below it); [] for a run never tested; a
    place that is gone is left out (a study's /tmp runs may be cleaned before it writes)."""
    from attnexp.config import layout
    from attnexp.results import test_reads as ledger
    from attnexp.results.compare import find_summaries

    runs = {}
    for p in (p for p in map(Path, places) if p.exists()):
        for s in find_summaries([(ledger.run_of(p) or p.parent) if p.is_file() else p]):  # compare's walk
            if (s.parent / layout.CHECKPOINTS).is_dir():  # a run, not an eval's folder
                runs[str(s.parent)] = ledger.read(s.parent)
    return runs


def reads_counted(reads: dict[str, list]) -> str:
    """A result file's test reads in a few words, for its markdown (the JSON keeps each read)."""
    from collections import Counter

    runs = Counter(len(v) for k, v in reads.items() if k != "this process")
    said = [f"{n} run(s) with {k} read(s) of their test split" for k, n in sorted(runs.items())]
    return "; ".join(said + [f"this process: {r}" for r in reads.get("this process", [])])


def write_results(out: Path | str, stem: str, meta: dict, results: list[dict], title: str,
                  columns: Sequence[str] | None = None, note: str = "", runs: Iterable[Path | str] = ()) -> str:
    """<out>/<stem>.json ({**meta, "made": provenance(), "results": results}) and <stem>.md (the title,
    the meta as one JSON line, `note`, and the results as a table of `columns`, default every key of the
    first row); `runs`: the run or sweep folders whose test reads it records (provenance).
    Returns the table."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {**meta, "made": meta.get("made") or provenance(runs)}  # how it was made (provenance), in every file
    table = markdown_table(results, columns or (list(results[0]) if results else []))
    (out / f"{stem}.json").write_text(json.dumps({**meta, "results": results}, indent=2) + "\n")
    shown = {**meta, "made": {**meta["made"], **({"test_reads": reads_counted(meta["made"]["test_reads"])}
                                                 if "test_reads" in meta["made"] else {})}}
    (out / f"{stem}.md").write_text(f"# {title}\n\n{json.dumps(shown)}\n\n" + (f"{note}\n\n" if note else "") + f"{table}\n")
    return table


@contextmanager
def scratch(prefix: str, given: str | Path | None = None) -> Iterator[Path]:
    """A folder for a script's own runs: `given` where the caller named one (left in place), else a
    temporary one, removed however the script ends. The runs a study trains to read its figures are
    not its output; left behind, every CI call of the GPU suite's smoke kept 1.8 GB of fine-tune
    checkpoints in /tmp until the disk was full."""
    if given:
        yield Path(given)
        return
    with tempfile.TemporaryDirectory(prefix=prefix, ignore_cleanup_errors=True) as folder:
        yield Path(folder)


def chromium(args: list[str], size: str, wait_ms: int, text: bool = False) -> subprocess.CompletedProcess:
    """Headless Chromium on `args` (a URL and --screenshot=PATH or --dump-dom) in a fresh profile, after
    `wait_ms` of virtual time for pages that draw asynchronously."""
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        raise SystemExit("this needs Debian's chromium (apt-get install chromium)")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
             f"--window-size={size}", f"--virtual-time-budget={wait_ms}"]
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([binary, *flags, f"--user-data-dir={profile}", *args], check=True, capture_output=True,
                              text=text, timeout=180)


def screenshot(url: str, out: Path, size: str, wait_ms: int = 10000) -> None:
    """A headless-Chromium picture of `url`."""
    chromium([f"--screenshot={out}", url], size, wait_ms)


def page_dom(url: str, wait_ms: int = 10000) -> str:
    """The DOM of `url` once its scripts have drawn it (MLflow's, TensorBoard's pages)."""
    return chromium(["--dump-dom", url], "1600,1000", wait_ms, text=True).stdout


def own_data(ckpt: str | Path) -> list[str]:
    """The data files a checkpoint this script trained was read from, named again for `evaluate`: a
    checkpoint never chooses what attnexp reads (docs/security.md), so whoever knows them gives them."""
    import torch

    location = (torch.load(ckpt, map_location="cpu", weights_only=True, mmap=True).get("data_identity") or {}).get("location")
    return [f"data.{k}={v}" for k, v in (location or {}).items() if k in ("path", "corpus", "tokenizer", "hub_name")
            and v is not None]
