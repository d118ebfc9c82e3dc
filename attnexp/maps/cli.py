"""`python -m attnexp maps ckpt=PATH text="..." [out=DIR] [max_tokens=N]`: the attention maps of
a trained checkpoint for any text — a PNG grid, the raw weights (.npz) and a viewer.html."""

from __future__ import annotations

import sys
from pathlib import Path

from attnexp.config import ConfigError, MapsConfig, from_dict, validate_maps

USAGE = ('usage: python -m attnexp maps ckpt=PATH text="some text" [text="more"] [out=DIR] [max_tokens=64] '
         '[scale=row|head|log|linear] [long=blocks|first]')


def parse(argv: list[str]) -> dict:
    args: dict = {"text": []}
    if any(a in ("-h", "--help") for a in argv):
        print(USAGE)
        raise SystemExit(0)
    for a in argv:
        key, sep, value = a.partition("=")
        if not sep or key not in ("ckpt", "text", "out", "max_tokens", "scale", "long"):
            raise ConfigError(f"cannot read {a!r}; {USAGE}")
        if key == "text":
            args["text"].append(value)
        else:
            args[key] = value
    if "ckpt" not in args or not args["text"]:
        raise ConfigError(f"give ckpt= and at least one text=; {USAGE}")
    return args


def encoder_from(ckpt: dict):
    from attnexp.data.encoder import TextEncoder

    for key, value in ckpt.items():
        if key.endswith("DataModule") and isinstance(value, dict) and "encoder" in value:
            return TextEncoder.from_state(value["encoder"])
    raise ConfigError("this checkpoint holds no tokenizer (it predates attnexp 0.1's maps); retrain it")


def module_from(ckpt: dict, path: Path):
    """The model a checkpoint describes, its settings checked like a config (a stranger's file
    cannot ask for an absurd size), its tensors checked against the model built from them."""
    from attnexp import attention, checkpoints
    from attnexp.config import AttentionConfig, ModelConfig, OptimConfig, TaskConfig, from_dict, validate_model
    from attnexp.lit import AttnexpModule

    hp = ckpt["hyper_parameters"]
    try:
        m = from_dict(ModelConfig, hp["model"], "model")
        validate_model(m)
        a = attention.validate(from_dict(AttentionConfig, hp["attention"], "attention"), m)
        t, o = from_dict(TaskConfig, hp["task"], "task"), from_dict(OptimConfig, hp["optim"], "optim")
        vocab, classes = hp["vocab_size"], hp.get("num_classes")
        if not isinstance(vocab, int) or not 0 < vocab <= 10_000_000 or not (classes is None or isinstance(classes, int)):
            raise ConfigError(f"vocab_size={vocab!r}, num_classes={classes!r} are not sizes")
    except (ConfigError, KeyError, TypeError) as e:
        raise ConfigError(f"ckpt={str(path)!r} does not describe an attnexp model ({e})") from None
    module = AttnexpModule.from_configs(m, a, t, o, vocab, classes)
    checkpoints.check_shapes(ckpt, module.state_dict(), "ckpt", path)
    module.load_state_dict(ckpt["state_dict"])
    return module.eval()


def free_folder(base: Path) -> Path:
    """`base`, or base-2, base-3, ...: a second call never overwrites the first one's maps."""
    out, n = base, 1
    while out.exists() and any(out.iterdir()):
        n += 1
        out = base.with_name(f"{base.name}-{n}")
    return out


def maps_cli(argv: list[str]) -> int:
    try:
        return _maps(parse(argv))
    except ConfigError as e:
        print(f"attnexp maps: {e}", file=sys.stderr)
        return 2


def _maps(args: dict) -> int:
    from attnexp import checkpoints
    from attnexp.maps import stats
    from attnexp.maps.html import write_viewer
    from attnexp.maps.probe import Probe, attention_maps, save_snapshot

    path = Path(args["ckpt"])
    ckpt = checkpoints.load(path, "ckpt")
    enc = encoder_from(ckpt)
    module = module_from(ckpt, path)
    max_len = module.mcfg.max_len
    ids = [enc.encode(t)[:max_len] for t in args["text"]]
    for t, x in zip(args["text"], ids):
        unknown = enc.unknown_words(t)
        if unknown:
            print(f"attnexp maps: {len(unknown)} word(s) of {t[:40]!r} are not in the vocabulary and became [UNK]: "
                  f"{', '.join(unknown[:10])}{' ...' if len(unknown) > 10 else ''}", file=sys.stderr)
    probe = Probe(ids, [enc.decode(x) for x in ids])
    w = attention_maps(module.model, probe, pad_id=enc.pad_id)
    out = Path(args["out"]) if args.get("out") else free_folder(path.parent.parent / "maps" / f"custom_{path.stem}")
    if args.get("out") and out.is_dir() and any(out.iterdir()):
        raise ConfigError(f"out={str(out)!r} already holds files; give a new folder (or leave out= out: "
                          f"<run>/maps/custom_<checkpoint>[-N])")
    out.mkdir(parents=True, exist_ok=True)
    try:
        view = from_dict(MapsConfig, {k: int(v) if k == "max_tokens" else v for k, v in args.items()
                                      if k in ("max_tokens", "scale", "long")}, "")
        validate_maps(view)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    save_snapshot(out, "maps", w, probe, stats.head_stats(w, probe.lengths), path.name, view)
    write_viewer(out / "viewer.html", [(int(ckpt.get("epoch", 0)), w)], probe.tokens, view.viewer_tokens,
                 title=path.name, long=view.long, scale=view.scale)
    print(f"maps of {len(ids)} text(s) from {path} -> {out}/ (maps_ex0.png ..., maps.npz, viewer.html)")
    return 0


if __name__ == "__main__":
    sys.exit(maps_cli(sys.argv[1:]))
