"""`python -m attnexp maps ckpt=PATH text="..." [out=DIR] [max_tokens=N]`: the attention maps of
a trained checkpoint for any text — a PNG grid, the raw weights (.npz) and a viewer.html.
`hf=NAME-OR-FOLDER` instead of ckpt= draws a pretrained BERT or GPT-2 (attnexp.model.pretrained), with
`text_pair=` for BERT's sentence pairs; `bertviz=true` adds bertviz's head and model views."""

from __future__ import annotations

import sys

from attnexp.config import ConfigError, MapsConfig, from_dict

USAGE = ('usage: python -m attnexp maps ckpt=PATH|hf=NAME-OR-FOLDER text="some text" [text="more"] '
         '[text_pair="second sentence"] [out=DIR] [max_tokens=64] [scale=row|head|log|linear] [long=blocks|first] '
         '[dtype=float16|float32] [bertviz=true]')
HELP = (USAGE + "\n\n  dtype   the weights in maps.npz: float16 (the default, half the size: each weight is off by at most "
        "2^-11 of itself, ~4.9e-4, and one below ~3e-8 is stored as 0) or float32 (exact)")
KEYS = ("ckpt", "hf", "text", "text_pair", "out", "max_tokens", "scale", "long", "dtype", "bertviz")


def parse(argv: list[str]) -> dict:
    args: dict = {"text": [], "text_pair": []}
    if any(a in ("-h", "--help") for a in argv):
        print(HELP)
        raise SystemExit(0)
    for a in argv:
        key, sep, value = a.partition("=")
        if not sep or key not in KEYS:
            raise ConfigError(f"cannot read {a!r}; {USAGE}")
        if not value:  # ckpt= was reported as ckpt='.', out= drew into the working folder
            raise ConfigError(f"{key}= is empty; {USAGE}")
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


def maps_cli(argv: list[str]) -> int:
    try:
        args = parse(argv)
        view = view_of(args)  # settings first, before any model is loaded
        from attnexp import api

        out, n = api.draw_maps(ckpt=args.get("ckpt"), hf=args.get("hf"), texts=args["text"], text_pairs=args["text_pair"],
                               out=args.get("out"), view=view, bertviz=args.get("bertviz") == "true")
    except ConfigError as e:
        print(f"attnexp maps: {e}", file=sys.stderr)
        return 2
    extra = ", bertviz_*_view_ex*.html" if args.get("bertviz") == "true" else ""
    print(f"maps of {n} text(s) from {args.get('hf') or args['ckpt']} -> {out}/ (maps_ex0.png ..., maps.npz, viewer.html{extra})")
    return 0


def view_of(args: dict) -> MapsConfig:
    try:
        view = from_dict(MapsConfig, {k: int(v) if k == "max_tokens" and v.lstrip("-").isdigit() else v
                                      for k, v in args.items() if k in ("max_tokens", "scale", "long", "dtype")}, "")
        view.validate()
    except ValueError as e:
        raise ConfigError(str(e)) from None
    return view


if __name__ == "__main__":
    sys.exit(maps_cli(sys.argv[1:]))
