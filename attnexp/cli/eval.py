"""`python -m attnexp eval ckpt=PATH [split=test|val|train] [out=DIR] [data.KEY=VALUE ...]`: a
checkpoint's metrics on a split (lightning-hydra-template's eval.py ckpt_path=...), in a folder of
its own (default <run>/eval/<checkpoint>_<split>) with a summary.json and the split's maps."""

from __future__ import annotations

import sys

from attnexp.cli.exits import EXIT
from attnexp.config import ConfigError

USAGE = ("usage: python -m attnexp eval ckpt=PATH [split=test|val|train (default: test, or val where the data has no "
         "test split)] [out=DIR] [data.KEY=VALUE ...]  (ckpt_path=PATH, lightning-hydra-template's key, is ckpt)")
NOTE = ("  the data's settings are the checkpoint's; a file or folder it was read from (data.path, data.corpus, "
        "data.tokenizer) is read only when you give it again")


def eval_keys() -> list[str]:
    """The evaluation's own keys, as conf/eval.yaml (its primary config) declares them: ckpt, ckpt_path,
    split, out. Paths are read as given, not through Hydra's override grammar (a folder may hold spaces,
    '=' or parentheses)."""
    import yaml

    from attnexp.config.files import read_text
    from attnexp.config.paths import conf_dir

    own = yaml.safe_load(read_text(conf_dir() / "eval.yaml", 1 << 16))
    return [k for k in own if k != "defaults"]


def eval_cli(argv: list[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        print(f"{USAGE}\n{NOTE}")
        return 0
    args, data = {}, []
    try:
        keys = eval_keys()
        for a in argv:
            key, sep, value = a.partition("=")
            if sep and "." in key:
                data.append(a)  # data.* only: evaluate() says so of any other
            elif sep and key in keys:
                if not value:  # Path('') would read as the folder '.'
                    raise ConfigError(f"{key}= is empty; {USAGE}")
                args[key] = value
            else:
                raise ConfigError(f"cannot read {a!r}; {USAGE}")
        if "ckpt_path" in args:  # lightning-hydra-template's eval.py key (conf/eval.yaml): the same as ckpt
            if "ckpt" in args and args["ckpt"] != args["ckpt_path"]:
                raise ConfigError(f"ckpt={args['ckpt']} and ckpt_path={args['ckpt_path']} name two checkpoints; give one")
            args["ckpt"] = args.pop("ckpt_path")
        if "ckpt" not in args:
            raise ConfigError(f"give ckpt=PATH; {USAGE}")
        from attnexp import api
        from attnexp.training.stops import Interrupted, StopSignals

        try:
            with StopSignals():  # SIGTERM / Ctrl-C: stop at once, one line, no half-written folder
                s = api.evaluate(args["ckpt"], args.get("split"), data, args.get("out"))
        except Interrupted as e:
            print(f"attnexp eval: stopped by {e.signame}; nothing was written (run the same command again)",
                  file=sys.stderr)
            return EXIT[e.signame]
    except ConfigError as e:
        print(f"attnexp eval: {e}", file=sys.stderr)
        return 2
    metrics = " · ".join(f"{k} {v:.4f}" for k, v in s["metrics"]["test"].items())
    n = s["data"][f"n_{s['split']}"]
    print(f"attnexp eval: {s['split']} ({n} examples) {metrics}\n  -> {s['run_dir']}/ (summary.json, maps_ex0.png ..., "
          f"viewer.html)")
    return 0
