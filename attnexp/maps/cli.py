"""`python -m attnexp maps ckpt=PATH text="..." [out=DIR] [max_tokens=N]`: the attention maps of
a trained checkpoint for any text — a PNG grid, the raw weights (.npz) and a viewer.html.
`hf=NAME-OR-FOLDER` instead of ckpt= draws a pretrained BERT or GPT-2 (attnexp.hf), with
`text_pair=` for BERT's sentence pairs; `bertviz=true` adds bertviz's head and model views."""

from __future__ import annotations

import sys
from dataclasses import dataclass
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


@dataclass
class Source:
    """What to draw: a model in eval mode, its probe set and pad id, a title, the epoch the viewer
    shows and the folder the maps go to when out= is not given."""

    model: object
    probe: object
    pad_id: int
    title: str
    epoch: int
    default_out: Path


def from_checkpoint(args: dict) -> Source:
    from attnexp import checkpoints
    from attnexp.maps.probe import Probe

    path = Path(args["ckpt"])
    ckpt = checkpoints.load(path, "ckpt")
    enc = encoder_from(ckpt)
    module = module_from(ckpt, path)
    ids = [enc.encode(t)[: module.mcfg.max_len] for t in args["text"]]
    for t in args["text"]:
        unknown = enc.unknown_words(t)
        if unknown:
            print(f"attnexp maps: {len(unknown)} word(s) of {t[:40]!r} are not in the vocabulary and became [UNK]: "
                  f"{', '.join(unknown[:10])}{' ...' if len(unknown) > 10 else ''}", file=sys.stderr)
    return Source(module.model, Probe(ids, [enc.decode(x) for x in ids]), enc.pad_id, path.name,
                  int(ckpt.get("epoch", 0)), path.parent.parent / "maps" / f"custom_{path.stem}")


def from_pretrained(args: dict) -> Source:
    """Weights through transformers (attnexp.hf), the tokenizer through tokenizers: a BERT pair
    gets its token types."""
    from tokenizers import Tokenizer

    from attnexp import attention, hf
    from attnexp.config import AttentionConfig, ModelConfig
    from attnexp.maps.probe import Probe
    from attnexp.model import Transformer

    source = args["hf"]
    m, a = hf.configs(source, ModelConfig(), AttentionConfig(backend="eager"))
    model = Transformer(m, attention.validate(a, m), hf.hf_config(source).vocab_size)
    hf.load_into(model, source)
    tok_path = hf.tokenizer_of(source)
    tok = Tokenizer.from_file(tok_path) if Path(tok_path).exists() else Tokenizer.from_pretrained(tok_path)
    tok.no_truncation()
    encs = [tok.encode(t, p) for t, p in zip(args["text"], args["text_pair"] or [None] * len(args["text"]))]
    probe = Probe([e.ids[: m.max_len] for e in encs], [e.tokens[: m.max_len] for e in encs],
                  types=[e.type_ids[: m.max_len] for e in encs] if m.type_vocab_size else None)
    name = Path(source).name or source.replace("/", "_")
    return Source(model.eval(), probe, tok.token_to_id("[PAD]") or 0, name, 0, Path("maps") / f"hf_{name}")


def _maps(args: dict) -> int:
    from attnexp.maps import stats
    from attnexp.maps.html import write_viewer
    from attnexp.maps.probe import attention_maps, save_snapshot

    view = view_of(args)  # settings first, before any model is loaded
    bertviz = args.get("bertviz") == "true"
    if bertviz:
        from attnexp.maps import bertviz_export

        bertviz_export.require()
    src = from_pretrained(args) if "hf" in args else from_checkpoint(args)
    w = attention_maps(src.model, src.probe, pad_id=src.pad_id)
    out = out_folder(args, src.default_out)
    title = f"{src.title} (pretrained)" if "hf" in args else src.title
    save_snapshot(out, "maps", w, src.probe, stats.head_stats(w, src.probe.lengths), title, view)
    write_viewer(out / "viewer.html", [(src.epoch, w)], src.probe.tokens, view.viewer_tokens, title=src.title,
                 long=view.long, scale=view.scale)
    if bertviz:
        bertviz_export.write(out, w, src.probe)
    print(f"maps of {len(src.probe.ids)} text(s) from {args.get('hf') or args['ckpt']} -> {out}/ (maps_ex0.png ..., "
          f"maps.npz, viewer.html{', bertviz_*_view_ex*.html' if bertviz else ''})")
    return 0


if __name__ == "__main__":
    sys.exit(maps_cli(sys.argv[1:]))
