"""The maps of any text through a model, drawn and saved (what `attnexp maps` writes): the PNG
grids, the raw weights (.npz), a viewer.html and optionally bertviz's views, into a folder that
never overwrites an earlier call's."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from attnexp.config import ConfigError, MapsConfig, layout
from attnexp.config.checks import unwritable


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
    first_word_id: int | None = None  # where random-token inputs (the induction probe) start; None: no induction
    class_names: list[str] | None = None


def free_folder(base: Path) -> Path:
    """`base`, or base-2, base-3, ...: a second call never overwrites the first one's maps."""
    out, n = base, 1
    while out.exists() and any(out.iterdir()):
        n += 1
        out = base.with_name(f"{base.name}-{n}")
    return out


def out_folder(out: str | None, default: Path) -> Path:
    """`out` (which must be new or empty), or `default` made free (`free_folder`)."""
    if out and Path(out).exists() and not Path(out).is_dir():
        raise ConfigError(f"out={str(out)!r} is a file; give a folder (a new or empty one) for the maps")
    problem = unwritable(Path(out) if out else default, "out", "the maps' folder")
    if problem:
        raise ConfigError(problem)
    folder = Path(out) if out else free_folder(default)
    if out and folder.is_dir() and any(folder.iterdir()):
        raise ConfigError(f"out={str(folder)!r} already holds files; give a new folder (or leave out= out: {default}[-N])")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def draw(src: Source, out: Path, view: MapsConfig, bertviz: bool = False, pretrained: bool = False) -> Path:
    """The probe set's maps through `src.model`, saved under `out`."""
    from attnexp.heads.analysis import context_of, read_heads
    from attnexp.heads.probe import attention_maps
    from attnexp.maps import snapshot
    from attnexp.maps.html import write_viewer

    w = attention_maps(src.model, src.probe, pad_id=src.pad_id)
    title = f"{src.title} (pretrained)" if pretrained else src.title
    a = read_heads(src.model, src.probe, w, src.pad_id, view, context_of(src.model, src.probe, src.first_word_id))
    snapshot.save(out, "maps", w, src.probe, a, title, view)
    write_viewer(out / layout.VIEWER, [(src.epoch, w, a)], src.probe.tokens, view.viewer_tokens, title=src.title,
                 long=view.long, scale=view.scale, class_names=src.class_names)
    if bertviz:
        from attnexp.maps import bertviz_export

        bertviz_export.write(out, w, src.probe)
    return out
