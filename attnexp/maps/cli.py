"""`python -m attnexp maps ckpt=PATH text="..." [out=DIR] [max_tokens=N]`: the attention maps of
a trained checkpoint for any text — a PNG grid, the raw weights (.npz) and a viewer.html.
`hf=NAME-OR-FOLDER` instead of ckpt= draws a pretrained BERT or GPT-2 (attnexp.hf), with
`text_pair=` for BERT's sentence pairs; `bertviz=true` adds bertviz's head and model views."""

from __future__ import annotations

import sys
from pathlib import Path

from attnexp.config import ConfigError, MapsConfig, from_dict, validate_maps

USAGE = ('usage: python -m attnexp maps ckpt=PATH|hf=NAME-OR-FOLDER text="some text" [text="more"] '
         '[text_pair="second sentence"] [out=DIR] [max_tokens=64] [scale=row|head|log|linear] [long=blocks|first] '
         '[bertviz=true]')
KEYS = ("ckpt", "hf", "text", "text_pair", "out", "max_tokens", "scale", "long", "bertviz")


def parse(argv: list[str]) -> dict:
    args: dict = {"text": [], "text_pair": []}
    if any(a in ("-h", "--help") for a in argv):
        print(USAGE)
        raise SystemExit(0)
    for a in argv:
        key, sep, value = a.partition("=")
        if not sep or key not in KEYS:
            raise ConfigError(f"cannot read {a!r}; {USAGE}")
        if key in ("text", "text_pair"):
            args[key].append(value)
        else:
            args[key] = value
    if ("ckpt" in args) == ("hf" in args) or not args["text"]:
        raise ConfigError(f"give ckpt= or hf= (one of them) and at least one text=; {USAGE}")
    if args["text_pair"] and ("hf" not in args or len(args["text_pair"]) != len(args["text"])):
        raise ConfigError(f"text_pair= goes with hf= (a BERT sentence pair), one for each text=; {USAGE}")
    if args.get("bertviz", "false") not in ("true", "false"):
        raise ConfigError(f"bertviz={args['bertviz']!r}: give true or false")
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


def view_of(args: dict) -> MapsConfig:
    try:
        view = from_dict(MapsConfig, {k: int(v) if k == "max_tokens" else v for k, v in args.items()
                                      if k in ("max_tokens", "scale", "long")}, "")
        validate_maps(view)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    return view


def out_folder(args: dict, default: Path) -> Path:
    out = Path(args["out"]) if args.get("out") else free_folder(default)
    if args.get("out") and out.is_dir() and any(out.iterdir()):
        raise ConfigError(f"out={str(out)!r} already holds files; give a new folder (or leave out= out: {default}[-N])")
    out.mkdir(parents=True, exist_ok=True)
    return out


def _hf_maps(args: dict) -> int:
    """A pretrained model's maps: weights and tokenizer from transformers / tokenizers, drawn by the same code."""
    from tokenizers import Tokenizer

    from attnexp import attention, hf
    from attnexp.config import AttentionConfig, ModelConfig
    from attnexp.maps import stats
    from attnexp.maps.html import write_viewer
    from attnexp.maps.probe import Probe, attention_maps, save_snapshot
    from attnexp.model import Transformer

    source = args["hf"]
    view = view_of(args)
    if args.get("bertviz") == "true":
        from attnexp.maps import bertviz_export

        bertviz_export.require()
    m, a = hf.configs(source, ModelConfig(), AttentionConfig(backend="eager"))
    a = attention.validate(a, m)
    model = Transformer(m, a, hf.hf_config(source).vocab_size)
    hf.load_into(model, source)
    tok_path = hf.tokenizer_of(source)
    tok = Tokenizer.from_file(tok_path) if Path(tok_path).exists() else Tokenizer.from_pretrained(tok_path)
    tok.no_truncation()
    pairs = args["text_pair"] or [None] * len(args["text"])
    encs = [tok.encode(t, p) for t, p in zip(args["text"], pairs)]
    ids = [e.ids[: m.max_len] for e in encs]
    types = [e.type_ids[: m.max_len] for e in encs]
    probe = Probe(ids, [e.tokens[: m.max_len] for e in encs], types=types if m.type_vocab_size else None)
    pad_id = tok.token_to_id("[PAD]") or 0
    w = attention_maps(model.eval(), probe, pad_id=pad_id)
    name = Path(source).name or source.replace("/", "_")
    out = out_folder(args, Path("maps") / f"hf_{name}")
    save_snapshot(out, "maps", w, probe, stats.head_stats(w, probe.lengths), f"{name} (pretrained)", view)
    write_viewer(out / "viewer.html", [(0, w)], probe.tokens, view.viewer_tokens, title=name, long=view.long, scale=view.scale)
    if args.get("bertviz") == "true":
        starts = [t.index(1) if 1 in t else None for t in types] if m.type_vocab_size else None
        bertviz_export.write(out, w, probe.tokens, starts)
    print(f"maps of {len(ids)} text(s) from {source} -> {out}/ (maps_ex0.png ..., maps.npz, viewer.html"
          f"{', bertviz_*_view_ex*.html' if args.get('bertviz') == 'true' else ''})")
    return 0


def _maps(args: dict) -> int:
    from attnexp import checkpoints
    from attnexp.maps import stats
    from attnexp.maps.html import write_viewer
    from attnexp.maps.probe import Probe, attention_maps, save_snapshot

    if "hf" in args:
        return _hf_maps(args)
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
    view = view_of(args)
    if args.get("bertviz") == "true":
        from attnexp.maps import bertviz_export

        bertviz_export.require()
    out = out_folder(args, path.parent.parent / "maps" / f"custom_{path.stem}")
    save_snapshot(out, "maps", w, probe, stats.head_stats(w, probe.lengths), path.name, view)
    write_viewer(out / "viewer.html", [(int(ckpt.get("epoch", 0)), w)], probe.tokens, view.viewer_tokens,
                 title=path.name, long=view.long, scale=view.scale)
    if args.get("bertviz") == "true":
        bertviz_export.write(out, w, probe.tokens)
    print(f"maps of {len(ids)} text(s) from {path} -> {out}/ (maps_ex0.png ..., maps.npz, viewer.html"
          f"{', bertviz_*_view_ex*.html' if args.get('bertviz') == 'true' else ''})")
    return 0


if __name__ == "__main__":
    sys.exit(maps_cli(sys.argv[1:]))
