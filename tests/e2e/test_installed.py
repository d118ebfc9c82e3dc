"""Installed as users install it: a wheel of this checkout in a fresh venv, every command run from a
folder that is not the checkout. Before the configs shipped inside the package the first `train`
said "attnexp's conf/ folder is missing" (the wheel held no yaml at all)."""

from __future__ import annotations

import json
import zipfile

import pytest

from helpers import installed

pytestmark = pytest.mark.slow
QUICK = ["trainer.max_epochs=1", "trainer.limit_train_batches=4", "trainer.limit_val_batches=2", "logger=none",
         "data.n_sentences=400", "trainer.enable_progress_bar=false", "maps.animation=false"]


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory):
    root = tmp_path_factory.mktemp("installed")
    wheel = installed.build_wheel(root / "wheel")
    py = installed.venv_with(root / "venv", str(wheel))
    work = root / "elsewhere"
    work.mkdir()
    return wheel, py, work


def ok(done) -> str:
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_wheel_holds_the_configs_and_the_viewer_assets(wheel_env):
    wheel, _, _ = wheel_env
    names = zipfile.ZipFile(wheel).namelist()
    from helpers.runs import CONF

    want = {f"attnexp/conf/{p.relative_to(CONF).as_posix()}" for p in CONF.rglob("*.yaml")}
    assert want and want <= set(names), sorted(want - set(names))[:5]
    assert "attnexp/maps/viewer.html" in names and any(n.startswith("attnexp/maps/vendor/") for n in names)
    assert any(n.startswith("hydra_plugins/attnexp_optuna_sweeper/") for n in names)


def test_another_hydra_app_starts_beside_the_installed_wheel(wheel_env, tmp_path):
    """Hydra's plugin scan of the installed `hydra_plugins/` (tests/unit/launch/test_other_hydra_apps.py
    runs the same app beside the editable install)."""
    _, py, _ = wheel_env
    lines = installed.other_hydra_app(py, tmp_path)
    assert "app ran" in lines and "composed 0.1 hydra_plugins.attnexp_optuna_sweeper.sweeper.OptunaSweeper" in lines


def test_every_command_works_from_the_installed_wheel(wheel_env):
    _, py, work = wheel_env
    out = ok(installed.run(py, "train", *QUICK, cwd=work))
    assert "run completed" in out
    run_dir = next((work / "outputs").glob("*/*/summary.json")).parent
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["status"] == "completed"
    assert (run_dir / "maps" / "viewer.html").is_file()
    ckpt = run_dir / "checkpoints" / "last.ckpt"

    assert "val/" in ok(installed.run(py, "eval", f"ckpt={ckpt}", "split=val", f"out={work / 'eval'}", cwd=work))
    sampled = ok(installed.run(py, "sample", f"ckpt={ckpt}", "prompt=the dog", "max_new_tokens=5", cwd=work))
    assert sampled.strip()
    ok(installed.run(py, "maps", f"ckpt={ckpt}", "text=the dog runs .", f"out={work / 'maps'}", cwd=work))
    assert (work / "maps" / "viewer.html").is_file()

    ok(installed.run(py, "train", "-m", "seed=0,1", *QUICK, cwd=work))
    sweep = next((work / "multirun").glob("*/*/"))
    assert len(list(sweep.glob("*/summary.json"))) == 2
    assert "seed" in ok(installed.run(py, "compare", str(sweep), cwd=work))

    ok(installed.run(py, "train", "-m", "hparams_search=optuna", "hydra.sweeper.n_trials=2", *QUICK, cwd=work))
    assert list((work / "multirun" / "optuna").glob("*.db")), "the study lives under paths.sweep_dir"
    assert not (work / "optuna").exists()

    helped = ok(installed.run(py, "train", "--help", cwd=work))
    assert "== Config groups" in helped and "experiment: " in helped and "induction" in helped
