"""`python -m attnexp maps ckpt=PATH text="..." [out=DIR] [max_tokens=N]`: the attention maps of
a trained checkpoint for any text — a PNG grid, the raw weights (.npz) and a viewer.html."""

from __future__ import annotations

import sys
from pathlib import Path

USAGE = 'usage: python -m attnexp maps ckpt=PATH text="some text" [text="more"] [out=DIR] [max_tokens=64]'


def parse(argv: list[str]) -> dict:
    args: dict = {"text": []}
    if any(a in ("-h", "--help") for a in argv):
        print(USAGE)
        raise SystemExit(0)
    for a in argv:
        key, sep, value = a.partition("=")
        if not sep or key not in ("ckpt", "text", "out", "max_tokens"):
            raise SystemExit(f"attnexp maps: cannot read {a!r}\n{USAGE}")
        if key == "text":
            args["text"].append(value)
        else:
            args[key] = value
    if "ckpt" not in args or not args["text"]:
        raise SystemExit(f"attnexp maps: give ckpt= and at least one text=\n{USAGE}")
    return args


def encoder_from(ckpt: dict):
    from attnexp.data.encoder import TextEncoder

    for key, value in ckpt.items():
        if key.endswith("DataModule") and isinstance(value, dict) and "encoder" in value:
            return TextEncoder.from_state(value["encoder"])
    raise SystemExit("attnexp maps: this checkpoint holds no tokenizer (it predates attnexp 0.1's maps); retrain it")


def maps_cli(argv: list[str]) -> int:
    import torch

    from attnexp.lit import AttnexpModule
    from attnexp.maps import stats
    from attnexp.maps.html import write_viewer
    from attnexp.maps.probe import Probe, attention_maps, save_snapshot

    args = parse(argv)
    path = Path(args["ckpt"])
    if not path.is_file():
        raise SystemExit(f"attnexp maps: ckpt={str(path)!r}: no such file (runs keep them in <run>/checkpoints/)")
    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    enc = encoder_from(ckpt)
    module = AttnexpModule.load_from_checkpoint(path, map_location="cpu").eval()
    max_len = module.mcfg.max_len
    ids = [enc.encode(t)[:max_len] for t in args["text"]]
    probe = Probe(ids, [enc.decode(x) for x in ids])
    w = attention_maps(module.model, probe, pad_id=enc.pad_id)
    out = Path(args.get("out") or path.parent.parent / "maps" / f"custom_{path.stem}")
    out.mkdir(parents=True, exist_ok=True)
    n = int(args.get("max_tokens", 64))
    save_snapshot(out, "maps", w, probe, stats.head_stats(w, probe.lengths), path.name, n)
    write_viewer(out / "viewer.html", [(int(ckpt.get("epoch", 0)), w)], probe.tokens, n, title=path.name)
    print(f"maps of {len(ids)} text(s) from {path} -> {out}/ (maps_ex0.png ..., maps.npz, viewer.html)")
    return 0


if __name__ == "__main__":
    sys.exit(maps_cli(sys.argv[1:]))
