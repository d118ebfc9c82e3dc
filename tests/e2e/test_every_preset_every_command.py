"""Every shipped experiment preset through the commands that read its checkpoint (issue 50): two
training steps and one validation batch (`trainer.limit_*`, so a checkpoint is written, which
fast_dev_run never does; 20 Newsgroups' first 200 posts a split) -> `eval split=val` -> `maps` ->
`attnexp.api.load(ckpt).attention(text)`.
newsgroups_bert fine-tunes the hub's bert-base-uncased (no network here); newsgroups_minilm needs
../shared/models and skips without it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from attnexp.api import load, train
from attnexp.cli import main
from helpers.runs import SHARED, options, run_of

SHORT = ["trainer.max_epochs=1", "trainer.limit_train_batches=2", "trainer.limit_val_batches=1", "test=false",
         "logger=none", "maps.enabled=false", "trainer.enable_progress_bar=false", "threads=1"]


@pytest.mark.slow
@pytest.mark.parametrize("preset", [p for p in options("experiment") if p != "newsgroups_bert"])
def test_a_preset_through_every_command(preset, tmp_path, capsys, monkeypatch):
    # these validate every 500 / 1000 steps
    extra = ["trainer.val_check_interval=null"] if preset in ("induction_heads", "induction_text") else []
    if preset.startswith("newsgroups") or preset == "induction_text":  # 20 Newsgroups: data=newsgroups or data=text
        data = SHARED / "data" / "20newsgroups"
        if not data.is_dir():
            pytest.skip(f"needs the shared 20 Newsgroups at {data}")
        # the first 200 posts of each split (data.limit, recorded in the checkpoint: eval reads the same)
        extra += [f"data.path={data}", f"data.cache_dir={tmp_path / 'cache'}", "data.limit=200"]
    if preset == "newsgroups_minilm":
        model = SHARED / "models" / "all-MiniLM-L6-v2"
        if not (model / "config.json").is_file():
            pytest.skip(f"needs the pretrained model in {model}")
        extra.append(f"model.init=hf:{model}")
    monkeypatch.chdir(tmp_path)
    s = train(run_of([f"experiment={preset}", *SHORT, *extra], tmp_path / "run"))
    assert s["status"] == "completed", s.get("error")
    ckpt = s["checkpoints"]["last"]
    # a checkpoint never chooses the files eval reads: the data folder, the cache and the tokenizer, given again
    data_again = [a for a in extra if a.startswith(("data.path", "data.cache_dir"))]
    if preset == "newsgroups_minilm":
        data_again.append(f"data.tokenizer={SHARED / 'models' / 'all-MiniLM-L6-v2' / 'tokenizer.json'}")
    assert main(["eval", f"ckpt={ckpt}", "split=val", *data_again, f"out={tmp_path / 'eval'}"]) == 0, capsys.readouterr().err
    assert main(["maps", f"ckpt={ckpt}", "text=the cat sat on the mat", f"out={tmp_path / 'maps'}"]) == 0, \
        capsys.readouterr().err
    assert list(Path(tmp_path / "maps").glob("*.png"))
    tokens, maps = load(ckpt).attention("the cat sat on the mat")
    assert maps.shape[2:] == (len(tokens), len(tokens)) and np.isfinite(maps).all()
