"""config/paths.py reads conf/paths/default.yaml for code that composes no run: one owner of the
folder defaults, whatever reads them."""

from __future__ import annotations

from attnexp.config.paths import conf_dir, default_cache_dir, default_paths


def test_the_cache_default_is_the_yamls_resolved_here(monkeypatch, tmp_path):
    from attnexp.data.configs import NewsgroupsDataConfig

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_dir() == f"{tmp_path}/attnexp"
    assert NewsgroupsDataConfig().cache_dir == f"{tmp_path}/attnexp"  # a data config built outside Hydra
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == f"{tmp_path}/home/.cache/attnexp"


def test_the_folder_defaults_are_spelled_in_conf_only():
    paths = default_paths()  # as written: interpolations unresolved
    assert (conf_dir() / "paths" / "default.yaml").is_file()
    assert (paths["log_dir"], paths["sweep_dir"]) == ("outputs", "multirun") and "${oc.env:" in paths["cache_dir"]
