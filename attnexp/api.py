"""attnexp from Python (a notebook, a script, a test): the same composition, validation, training,
evaluation, sampling and maps as the command line, each a thin call into the layer that does it.

    import attnexp.api as ax

    run = ax.load_run(ax.compose(["attention=alibi", "trainer.max_epochs=2"], "outputs/notebook"))  # typed, checked
    summary = ax.train(run)                                   # writes outputs/notebook/
    m = ax.load("outputs/notebook/checkpoints/last.ckpt")     # or ax.load("hf:path/to/bert")
    tokens, w = m.attention("the dog runs .")                 # w: (layers, heads, T, T)
    m.show("the dog runs .")                                  # the viewer, inline in Jupyter
"""

from __future__ import annotations

from pathlib import Path

from attnexp.config import MapsConfig
from attnexp.launch.compose import compose
from attnexp.launch.load import load_run

__all__ = ["compose", "load_run", "train", "evaluate", "sample", "load", "draw_maps"]


def train(run, callbacks=()):
    """Train one validated run (`load_run(compose(...))`); returns its summary (attnexp.training.fit)."""
    from attnexp.training.fit import train as fit

    return fit(run, callbacks)


def evaluate(ckpt: str, split: str | None = None, data_overrides: list[str] = (), out: str | None = None) -> dict:
    """A checkpoint's metrics on a split of the data it was trained on (attnexp.training.evaluate)."""
    from attnexp.training.evaluate import evaluate as run_eval

    return run_eval(ckpt, split, list(data_overrides), out)


def sample(ckpt: str, prompt: str, max_new_tokens: int = 50, temperature: float = 1.0, top_k: int | None = None,
           num_samples: int = 1, seed: int = 0) -> list[str]:
    """Continuations of `prompt` from a causal language model's checkpoint (attnexp.model.sample)."""
    from attnexp.model.sample import sample_text

    return sample_text(load(ckpt), prompt, max_new_tokens, temperature, top_k, num_samples, seed)


def load(spec: str | Path):
    """A checkpoint path or `hf:<hub name or folder>`, loaded for looking at: `.model`,
    `.attention(text)`, `.scores(text)`, `.show(text)` (attnexp.notebook.loaded.Loaded)."""
    from attnexp.notebook.loaded import Loaded

    return Loaded.of(spec)


def draw_maps(*, ckpt: str | None = None, hf: str | None = None, texts: list[str], text_pairs: list[str] | None = None,
              out: str | None = None, view: MapsConfig | None = None, bertviz: bool = False) -> tuple[Path, int]:
    """The attention maps of `texts` through a trained checkpoint (`ckpt=`) or a pretrained BERT /
    GPT-2 (`hf=`, with `text_pairs` for sentence pairs), saved in `out` (default: beside the
    checkpoint, or ./maps/hf_<name>); returns (the folder, the number of texts)."""
    from attnexp.maps import draw

    view = view or MapsConfig()
    if bertviz:
        from attnexp.maps import bertviz_export

        bertviz_export.require()
    src = maps_source_pretrained(hf, texts, text_pairs or []) if hf else maps_source_checkpoint(ckpt, texts)
    folder = draw.out_folder(out, src.default_out)
    draw.draw(src, folder, view, bertviz=bertviz, pretrained=bool(hf))
    return folder, len(src.probe.ids)


def maps_source_checkpoint(ckpt: str, texts: list[str]):
    """What `attnexp maps ckpt=` draws: `texts` through a trained checkpoint and its own tokenizer."""
    return load(ckpt).source(texts)


def maps_source_pretrained(source: str, texts: list[str], text_pairs: list[str]):
    """What `attnexp maps hf=` draws: `texts` (and BERT pairs) through a pretrained model."""
    return load(f"hf:{source}").source(texts, text_pairs or None)
