#!/usr/bin/env python
"""Open attnexp runs in their dashboards as their users would, and keep a picture of each.

--parts tensorboard (default), optuna, mlflow:

Trains a short run (experiment=copy, 3 epochs, TensorBoard logger) unless --run names a finished one,
starts `tensorboard --logdir RUN` on a free port of 127.0.0.1, checks through its HTTP API that the
Scalars, Images and HParams plugins hold this run's data (the loss and accuracy curves, the per-epoch
attention grids, the run's settings), takes a headless-Chromium screenshot of the Images and Scalars
tabs (the scalars filtered to val/ and train/), and stops the server it started (by its PID).
optuna: a 3-trial Optuna sweep into SQLite under optuna-dashboard (its API: the trials, values,
parameters and each trial's run folder), or, with --storage, a study already there (a PostgreSQL
server's that several workers share, a journal file). mlflow: a real `mlflow server` (SQLite store, proxied
artifacts) on 127.0.0.1, a short run logging to it (logger=mlflow), checked through MLflow's client
(metrics, the config as params, tags, the map images and viewer.html as artifacts), the run's page
pictured.

    python scripts/studies/dashboards.py                      # scripts/results/images/tensorboard_*.png
    python scripts/studies/dashboards.py --run outputs/DATE/TIME_copy_causal --out /tmp/shots
    python scripts/studies/dashboards.py --parts mlflow       # scripts/results/images/mlflow_*.png
    python scripts/studies/dashboards.py --parts optuna --storage postgresql+psycopg://USER:PW@HOST/optuna --out /tmp/shots

Prints what the API returned (JSON) and exits 1 if any of it is missing. The README's and the docs'
dashboard pictures are this script's output; tests/e2e/test_dashboards.py runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from common import page_dom, scratch  # noqa: E402
from common import screenshot as chromium_screenshot  # noqa: E402

RUN = ["experiment=copy", "trainer.max_epochs=3", "data.n_train=1500", "logger=tensorboard", "maps.n_examples=2",
       "trainer.enable_progress_bar=false", "test=false"]
# the tabs pictured: the per-epoch maps and head roles, the training curves (val/ and train/ only, unsmoothed)
# and the Custom Scalars layout (the curves, each per-head quantity's layer means, what matters)
TABS = {"images": "images", "scalars": "scalars&tagFilter=%5E(val%7Ctrain)%2F&_smoothingWeight=0",
        "custom_scalars": "custom_scalars&_smoothingWeight=0"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, timeout: float = 10) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - our own server on 127.0.0.1
        return r.read()


def tool(name: str) -> str:
    return shutil.which(name) or str(Path(sys.executable).with_name(name))


@contextmanager
def tensorboard(logdir: Path):
    """A TensorBoard server over `logdir` on 127.0.0.1; yields its URL; stopped by PID on the way out."""
    port = free_port()
    with server([tool("tensorboard"), f"--logdir={logdir}", "--host=127.0.0.1", f"--port={port}", "--reload_interval=1"],
                f"http://127.0.0.1:{port}", "/data/logdir") as url:
        yield url


@contextmanager
def optuna_dashboard(storage: str):
    """optuna-dashboard over an Optuna storage on 127.0.0.1; yields its URL; stopped by PID."""
    port = free_port()
    with server([tool("optuna-dashboard"), storage, "--host=127.0.0.1", f"--port={port}"], f"http://127.0.0.1:{port}",
                "/api/studies") as url:
        yield url


@contextmanager
def server(cmd: list[str], url: str, ready_path: str, env: dict | None = None):
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    try:
        for _ in range(120):
            if proc.poll() is not None:
                raise SystemExit(f"dashboards.py: {Path(cmd[0]).name} exited ({proc.returncode}): {proc.stderr.read()[-2000:]}")
            try:
                get(url + ready_path, timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_for(fetch, ok, seconds: float = 60):
    """fetch() until ok(its value) (TensorBoard reads the event files a moment after it starts)."""
    value = None
    for _ in range(int(seconds * 2)):
        value = fetch()
        if ok(value):
            break
        time.sleep(0.5)
    return value


def check(url: str) -> dict:
    """What TensorBoard's API says it has of the run: plugins with data, scalar and image tags."""
    plugins = wait_for(lambda: json.loads(get(f"{url}/data/plugins_listing")),
                       lambda p: all(p.get(k, {}).get("enabled") for k in ("scalars", "images", "hparams", "custom_scalars")))
    scalars = wait_for(lambda: json.loads(get(f"{url}/data/plugin/scalars/tags")), bool)
    images = wait_for(lambda: json.loads(get(f"{url}/data/plugin/images/tags")), bool)
    scalar_tags = sorted({t for run in scalars.values() for t in run})
    image_tags = sorted({t for run in images.values() for t in run})
    first = image_tags[0] if image_tags else None
    steps = []
    if first:
        run = next(r for r, tags in images.items() if first in tags)
        q = urllib.parse.urlencode({"tag": first, "run": run})
        steps = [e["step"] for e in json.loads(get(f"{url}/data/plugin/images/images?{q}"))]
    return {"plugins_with_data": sorted(k for k, v in plugins.items() if v.get("enabled")),
            "scalar_tags": scalar_tags, "image_tags": image_tags, "steps_of_first_image": steps}


def first_cards(url: str) -> dict:
    """The first scalar tags TensorBoard's Time Series page shows, opened plainly and at the page the
    run names (attnexp.training.loggers.tensorboard_page: the loss curves pinned first)."""
    from attnexp.training.loggers import tensorboard_page

    port = urllib.parse.urlsplit(url).port
    out = {}
    for name, page in (("plain", f"{url}/#timeseries"), ("named", tensorboard_page(port))):
        dom = page_dom(page.replace("localhost", "127.0.0.1"), wait_ms=15000)
        out[name] = re.findall(r"\b(?:attn|train|val|timeline|align|epoch)/[\w/]+", dom)[:4]
    return out


def problems(found: dict) -> list[str]:
    want = {"val/loss", "val/acc", "train/loss_epoch"}
    out = [f"plugin {p} has no data" for p in ("scalars", "images", "hparams", "custom_scalars")
           if p not in found["plugins_with_data"]]
    out += [f"no scalar {t}" for t in sorted(want - set(found["scalar_tags"]))]
    out += ["no attention-map image"] if not any("attention" in t or "maps" in t for t in found["image_tags"]) else []
    out += ["the maps have fewer than 2 epochs of steps"] if len(set(found["steps_of_first_image"])) < 2 else []
    named = found.get("first_cards", {}).get("named", [])
    out += [f"the page the run names does not open on the loss curves (first: {named})"] \
        if "first_cards" in found and named[:2] != ["train/loss", "val/loss"] else []
    return out


def screenshot(url: str, path: Path, size: str = "1400,1000") -> None:
    chromium_screenshot(url, path, size, wait_ms=20000)


SWEEP = ["hparams_search=optuna", "hydra.sweeper.n_trials=3", "trainer.max_epochs=2", "data.n_sentences=400",
         "logger=none", "maps.enabled=false", "trainer.enable_progress_bar=false"]


def optuna_study(folder: Path) -> str:
    """A 3-trial Optuna sweep of the default run into a SQLite study: its storage URL."""
    folder.mkdir(parents=True, exist_ok=True)
    storage = f"sqlite:///{folder / 'study.db'}"
    subprocess.run([sys.executable, "-m", "attnexp", "train", "-m", *SWEEP, f"hydra.sweeper.storage={storage}",
                    f"hydra.sweep.dir={folder / 'sweep'}"], cwd=REPO, check=True)
    return storage


def check_optuna(url: str) -> dict:
    """What optuna-dashboard's API says of the study: its trials, their values, parameters and run folders."""
    studies = json.loads(get(f"{url}/api/studies"))["study_summaries"]
    study = json.loads(get(f"{url}/api/studies/{studies[0]['study_id']}?after=0"))
    trials = study["trials"]
    return {"study": studies[0]["study_name"], "study_id": studies[0]["study_id"], "n_trials": len(trials),
            "metric_names": study.get("objective_names"),
            "states": sorted({t["state"] for t in trials}), "trial_states": [t["state"] for t in trials],
            "numbers": [t["number"] for t in trials],
            "values": [t.get("values") for t in trials],
            "params": sorted({p["name"] for t in trials for p in t["params"]}),
            "run_dirs": [next((a["value"] for a in t["user_attrs"] if a["key"] == "run_dir"), None) for t in trials]}


def train_run(folder: Path) -> Path:
    subprocess.run([sys.executable, "-m", "attnexp", "train", *RUN, f"hydra.run.dir={folder}"], cwd=REPO, check=True)
    return folder


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", help="a finished attnexp run with the TensorBoard logger (default: train one)")
    ap.add_argument("--out", default=str(REPO / "scripts" / "results" / "images"), help="where the screenshots go")
    ap.add_argument("--parts", default="tensorboard,optuna", help="comma list of: tensorboard, optuna, mlflow")
    ap.add_argument("--storage", help="optuna: show this study's storage (as hydra.sweeper.storage) instead of making one")
    ap.add_argument("--runs-in", default=None, metavar="DIR", help="train the runs, the study and the MLflow store in "
                    "DIR and keep them (default: a temporary folder, removed at the end)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    parts = args.parts.split(",")
    with scratch("attnexp-dash-", args.runs_in) as runs:
        if "optuna" in parts:
            opt_dashboard(out, runs, args.storage)
        if "tensorboard" in parts:
            tensorboard_part(args, out, runs)
        if "mlflow" in parts:
            mlflow_part(out, runs)


def opt_dashboard(out: Path, runs: Path, storage: str | None = None) -> None:
    """optuna-dashboard over a study made here (3 trials) or over `storage`'s: every finished trial
    shown with its value and its run folder; the password of a server's URL is never printed."""
    from attnexp.config.study import JOURNAL, StudyStorage
    from hydra_plugins.attnexp_optuna_sweeper._study_storage import dashboard_command

    made = storage is None
    storage = storage or optuna_study(runs / "optuna")
    with optuna_dashboard(storage[len(JOURNAL):] if storage.startswith(JOURNAL) else storage) as url:
        found = check_optuna(url)
        screenshot(f"{url}/dashboard/studies/{found['study_id']}", out / "optuna_dashboard.png")
    shown = shlex.split(dashboard_command(StudyStorage.parse(storage)))[1]  # a server's password as ***
    print(json.dumps({"storage": shown, **found, "screenshot": str(out / "optuna_dashboard.png")}, indent=2))
    done = [i for i, s in enumerate(found["trial_states"]) if s in ("Complete", "Pruned")]
    bad = [f"{found['n_trials']} trials, not 3"] if made and found["n_trials"] != 3 else []
    bad += ["no finished trial"] if not done else []
    bad += ["a trial without its run folder (user attribute run_dir)"] if not all(found["run_dirs"][i] for i in done) else []
    complete = [i for i in done if found["trial_states"][i] == "Complete"]
    bad += ["a trial without a value"] if not all(found["values"][i] for i in complete) else []
    if bad:
        raise SystemExit("dashboards.py: optuna-dashboard does not show " + "; ".join(bad))


def tensorboard_part(args, out: Path, runs: Path) -> None:
    run = Path(args.run) if args.run else train_run(runs / "run")
    with tensorboard(run) as url:
        found = check(url)
        for tab, fragment in TABS.items():
            screenshot(f"{url}/#{fragment}", out / f"tensorboard_{tab}.png")
        found["first_cards"] = first_cards(url)
    print(json.dumps({"run": str(run), **found, "screenshots": [str(out / f"tensorboard_{t}.png") for t in TABS]},
                     indent=2))
    bad = problems(found)
    if bad:
        raise SystemExit("dashboards.py: TensorBoard does not show " + "; ".join(bad))


@contextmanager
def mlflow_server(folder: Path):
    """`mlflow server` with a SQLite store and proxied artifacts under `folder`, on 127.0.0.1; stopped by PID."""
    port = free_port()
    with server([tool("mlflow"), "server", f"--backend-store-uri=sqlite:///{folder / 'mlflow.db'}",
                 f"--artifacts-destination={folder / 'artifacts'}", "--host=127.0.0.1", f"--port={port}", "--workers=1"],
                f"http://127.0.0.1:{port}", "/health", {**os.environ, "TMPDIR": str(folder)}) as url:  # its db_init_lock-*
        yield url


def check_mlflow(url: str) -> dict:
    """What the tracking server holds of the run, through MLflow's client."""
    from mlflow import MlflowClient

    client = MlflowClient(url)
    exp = client.get_experiment_by_name("attnexp")
    [r] = client.search_runs([exp.experiment_id])

    def files(path=None):
        out = []
        for f in client.list_artifacts(r.info.run_id, path):
            out += files(f.path) if f.is_dir else [f.path]
        return out

    return {"experiment_id": exp.experiment_id, "run_id": r.info.run_id, "run_name": r.info.run_name,
            "status": r.info.status, "artifact_uri": r.info.artifact_uri,
            "val_loss_points": len(client.get_metric_history(r.info.run_id, "val/loss")),
            "metrics": sorted(r.data.metrics), "n_params": len(r.data.params), "tags": dict(sorted(r.data.tags.items())),
            "artifacts": sorted(files())}


MLFLOW_RUN = "copy-run-for-the-dashboard"  # the run's folder, so its MLflow run name: a string no page holds by chance


def experiment_page(url: str, experiment_id: str, png: Path) -> dict:
    """The experiment's page as docs/runs.md links it (MLflow 3.17 opens an experiment on its GenAI view
    unless the link or the browser says Model training): whether the run is listed on it (by name) and
    whether MLflow put it on its GenAI view (traces) instead of the training runs; then a picture."""
    page = f"{url}/#/experiments/{experiment_id}?workflowType=machine_learning"
    dom = page_dom(page, wait_ms=20000)
    screenshot(page, png, "1600,1000")
    return {"url": page, "lists_the_run": MLFLOW_RUN in dom,
            "genai_view": "No data available" in dom or ">Traces<" in dom and MLFLOW_RUN not in dom}


def mlflow_part(out: Path, runs: Path) -> None:
    folder = runs / "mlflow"
    folder.mkdir(parents=True, exist_ok=True)
    with mlflow_server(folder) as url:
        subprocess.run([sys.executable, "-m", "attnexp", "train", *RUN, "logger=mlflow", f"logger.mlflow.tracking_uri={url}",
                        f"hydra.run.dir={folder / MLFLOW_RUN}", "tags=[dashboards]"], cwd=REPO, check=True)
        found = check_mlflow(url)
        found["experiment_page"] = experiment_page(url, found["experiment_id"], out / "mlflow_experiment.png")
        run_page = f"{url}/#/experiments/{found['experiment_id']}/runs/{found['run_id']}"
        screenshot(run_page, out / "mlflow_run.png", "1600,1000")
        screenshot(f"{run_page}/artifacts/maps/viewer.html", out / "mlflow_viewer.png", "1600,1000")
    print(json.dumps({"server": url, "folder": str(folder), **found,
                      "screenshots": [str(out / f"mlflow_{k}.png") for k in ("experiment", "run", "viewer")]}, indent=2))
    bad = [f"the run is {found['status']}"] if found["status"] != "FINISHED" else []
    bad += [f"val/loss has {found['val_loss_points']} points, not 3"] if found["val_loss_points"] != 3 else []
    bad += [f"no artifact {a}" for a in ("maps/viewer.html", "summary.json") if a not in found["artifacts"]]
    bad += ["the experiment's first page does not list the run"] if not found["experiment_page"]["lists_the_run"] else []
    bad += ["the experiment opens on MLflow's GenAI view"] if found["experiment_page"]["genai_view"] else []
    bad += ["no attention-map image"] if not any(a.startswith("images/attention_maps") for a in found["artifacts"]) else []
    bad += [f"artifacts written outside the server's store ({found['artifact_uri']})"] if not found["artifact_uri"].startswith(
        "mlflow-artifacts:") else []
    if bad:
        raise SystemExit("dashboards.py: MLflow does not show " + "; ".join(bad))


if __name__ == "__main__":
    main()
