"""Checkpoints handed to attnexp (resume=, `attnexp maps ckpt=`): loaded as data only
(`torch.load(weights_only=True)`: tensors, numbers, strings and containers, never code), and
checked before any training starts, with one line saying what is wrong. `model_from_checkpoint`
rebuilds the plain Transformer a checkpoint holds, without Lightning."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import torch

from attnexp import attention
from attnexp.config import AttentionConfig, ConfigError, ModelConfig, TaskConfig, check, from_dict, layout
from attnexp.model.transformer import Transformer

NAMES = (layout.INTERRUPTED, layout.LAST, layout.STEPS)  # what `resume=auto` considers, newest step first
MODEL_KEYS = ("d_model", "n_heads", "n_layers", "d_ff", "max_len", "pos_emb", "tie_embeddings")
MODEL_PREFIX = "model."  # the Lightning module keeps the Transformer as `model`


def load(path: str | Path, key: str = "ckpt") -> dict:
    """The checkpoint as a dict of plain data, memory-mapped (sizes and settings are read without
    reading every tensor). Anything else is a ConfigError naming `key=path`."""
    p, given = Path(path), str(path)
    if not p.is_file():  # Path("") is "." : the empty value is said as given
        what = ("= is empty" if not given.strip() else f"={given!r} is a folder" if p.is_dir()
                else f"={given!r}: no such checkpoint file")
        raise ConfigError(f"{key}{what} (runs keep their checkpoints in <run>/checkpoints/)")
    with open(p, "rb") as f:
        magic = f.read(4)
    if not (magic.startswith(b"PK\x03\x04") or magic[:1] == b"\x80"):  # torch.save's zip, or a legacy pickle
        raise ConfigError(f"{key}={str(path)!r} is not a checkpoint (not a file torch.save wrote); give a .ckpt from a "
                          f"run's checkpoints/ folder")
    try:
        try:
            ckpt = torch.load(p, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError as e:
            if "mmap" not in str(e):
                raise
            ckpt = torch.load(p, map_location="cpu", weights_only=True)  # a legacy (non-zip) file
    except Exception as e:  # the weights-only unpickler raises anything at all on a file that is not a pickle
        pickle_error = isinstance(e, pickle.UnpicklingError)
        what = re.search(r"(?:unsupported|Unsupported global:) GLOBAL ([\w.]+)", str(e)) if pickle_error else None
        if what:
            raise ConfigError(f"{key}={str(path)!r} was refused: it asks to call {what.group(1)}, which a checkpoint "
                              f"has no business doing; attnexp loads checkpoints as data only") from None
        if isinstance(e, pickle.UnpicklingError) and re.search(r"\bGLOBAL\b|Unsupported global", str(e)):
            raise ConfigError(f"{key}={str(path)!r} was refused: it asks to build objects a checkpoint has no "
                              f"business holding; attnexp loads checkpoints as data only") from None
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
        raise ConfigError(f"{key}={str(path)!r} is not a readable checkpoint (truncated, or not a file torch.save "
                          f"wrote): {first}") from None
    if not isinstance(ckpt, dict) or not {"state_dict", "hyper_parameters"} <= set(ckpt):
        raise ConfigError(f"{key}={str(path)!r} is a torch file but not an attnexp checkpoint (no state_dict and "
                          f"hyper_parameters); give a .ckpt from a run's checkpoints/ folder")
    return ckpt


def attention_identity(a: dict) -> dict:
    """What makes two attention layers the same function: the variant (older names resolved), the
    mask and every option the variant reads (its `options`: sizes such as mla's ranks, and values
    such as sigmoid's bias); not the backend or the dropout, which do not change the model."""
    name = a.get("name")
    try:
        cls = attention.get(name)
    except ValueError:
        return {"name": name, "mask": a.get("mask")}
    return {"name": cls.name, "mask": a.get("mask"), **{k: a.get(k) for k in sorted(cls.options)}}


def mismatch(ckpt: dict, model: dict, attention_cfg: dict, task: dict, key: str, path: str | Path) -> str | None:
    """None when the checkpoint's model is the one these settings build; else one line naming what differs."""
    hp = ckpt["hyper_parameters"]
    diff = [(f"model.{k}", hp.get("model", {}).get(k), model.get(k)) for k in MODEL_KEYS]
    diff.append(("model.mlp", hp.get("model", {}).get("mlp", True), model.get("mlp", True)))  # older checkpoints: MLPs
    theirs, ours = attention_identity(hp.get("attention", {})), attention_identity(attention_cfg)
    diff += [(f"attention.{k}", theirs.get(k), ours.get(k)) for k in {**theirs, **ours}]
    diff += [("task.name", hp.get("task", {}).get("name"), task.get("name"))]
    diff = [(k, was, now) for k, was, now in diff if was != now]
    if not diff:
        return None
    said = ", ".join(f"{k}={was} (this run: {now})" for k, was, now in diff)
    return f"{key}={str(path)!r} holds a different model: {said}; use the settings it was trained with"


RESUMABLE = ("optimizer_states", "lr_schedulers", "loops", "global_step", "epoch")


def check_resumable(ckpt: dict, key: str, path: str | Path) -> None:
    """A checkpoint `resume=` can continue: one Lightning saved with the optimizer, its schedule and
    the loops' progress, not weights alone."""
    missing = [k for k in RESUMABLE if k not in ckpt]
    check(not missing, f"{key}={str(path)!r} holds weights but no {', '.join(missing[:2])}: a run cannot continue "
                       f"from it; resume from a checkpoint a run saved whole (checkpoints/last.ckpt, step-*.ckpt)")


def check_shapes(ckpt: dict, state_dict: dict, key: str, path: str | Path) -> None:
    """Every tensor of the checkpoint fits the model built for this run (vocabulary and class
    counts come from the data, so this is checked once the data is set up)."""
    theirs = ckpt["state_dict"]
    missing = sorted(set(state_dict) - set(theirs))
    if missing:
        raise ConfigError(f"{key}={str(path)!r} lacks {len(missing)} of this model's tensors (e.g. {missing[0]}); "
                          f"it was trained with other settings")
    for name, t in state_dict.items():
        if tuple(theirs[name].shape) != tuple(t.shape):
            raise ConfigError(f"{key}={str(path)!r}: {name} has shape {tuple(theirs[name].shape)}, this model "
                              f"{tuple(t.shape)} (different data: vocabulary or classes); use the data it was trained on")


def newest(run_dir: str | Path) -> Path | None:
    """The checkpoint a resumed run continues from: the one with the most optimizer steps among
    interrupted.ckpt, last.ckpt and step-*.ckpt in <run_dir>/checkpoints (the newest file on a tie)."""
    folder = Path(run_dir) / layout.CHECKPOINTS
    found = [p for pattern in NAMES for p in folder.glob(pattern)]
    scored = []
    for p in found:
        try:
            scored.append((int(load(p, "resume").get("global_step", 0)), p.stat().st_mtime, p))
        except ConfigError:
            continue  # a file cut short by a kill: the previous one is the one to use
    return max(scored)[2] if scored else None


def held_elements(tensors: dict, key: str, path) -> int:
    """The values a file's tensors really hold: the elements of their distinct storages (the bytes on
    disk), not `numel()`, which a view inflates for free (`torch.zeros(1).expand(n, n)` is one float
    on disk and n*n once built). A tensor that is not contiguous, or not wholly inside its storage,
    is not one a model's state_dict saves: refused."""
    storages: dict[int, int] = {}
    for name, t in tensors.items():
        st = t.untyped_storage()
        end = (t.storage_offset() + t.numel()) * t.element_size()
        if t.numel() and (not t.is_contiguous() or st.nbytes() < end):
            raise ConfigError(f"{key}={str(path)!r}: tensor {str(name)[:80]!r} is a view ({tuple(t.shape)} over "
                              f"{st.nbytes():,} bytes); a saved model holds whole tensors, so it is not one")
        if st.nbytes():
            storages[st.data_ptr()] = st.nbytes() // t.element_size()
    return sum(storages.values())


def model_weights(ckpt: dict) -> dict[str, torch.Tensor]:
    """The plain Transformer's tensors of a Lightning checkpoint (the module keeps it as `model`)."""
    return {k[len(MODEL_PREFIX):]: v for k, v in ckpt["state_dict"].items()
            if isinstance(k, str) and k.startswith(MODEL_PREFIX) and isinstance(v, torch.Tensor)}


def check_finite(weights: dict, key: str, path: str | Path) -> None:
    """One line when some weights are NaN or infinite (a run that diverged, or a forged file): every
    map, score and sample drawn from them would be NaN, or a traceback deep inside sampling."""
    bad = [name for name, t in weights.items()
           if isinstance(t, torch.Tensor) and t.is_floating_point() and not bool(torch.isfinite(t).all())]
    if bad:
        raise ConfigError(f"{key}={str(path)!r} holds weights that are not numbers (NaN or inf in {len(bad)} tensor(s), "
                          f"first {bad[0][:60]!r}): the run diverged before it was saved, or the file is damaged; use "
                          f"an earlier checkpoint (checkpoints/best-*.ckpt)")


def model_from_checkpoint(ckpt: dict, path: str | Path, key: str = "ckpt"):
    """The Transformer a checkpoint describes, in eval mode: its settings checked like a config
    (a stranger's file cannot ask for an absurd size), its tensors checked against the model built
    from them, its weights loaded. Returns (model, hyper_parameters)."""
    hp = ckpt["hyper_parameters"]
    try:
        m = from_dict(ModelConfig, hp["model"], "model")
        m.validate()
        a = attention.validate(from_dict(AttentionConfig, hp["attention"], "attention"), m)
        t = from_dict(TaskConfig, hp["task"], "task")
        vocab, classes = hp["vocab_size"], hp.get("num_classes")
        if not isinstance(vocab, int) or not 0 < vocab <= 10_000_000 or not (classes is None or isinstance(classes, int)):
            raise ConfigError(f"vocab_size={vocab!r}, num_classes={classes!r} are not sizes")
    except (ConfigError, KeyError, TypeError) as e:
        raise ConfigError(f"{key}={str(path)!r} does not describe an attnexp model ({e})") from None
    weights = model_weights(ckpt)

    def build(device):
        with torch.device(device):
            return Transformer(m, a, vocab, head="classify" if t.name == "classify" else "lm", num_classes=classes,
                               pooling=t.pooling)

    # The sizes a stranger's file states are checked against the tensors it holds before any memory
    # is taken: on the meta device a model of any size costs nothing to build.
    meta = build("meta")
    shapes = meta.state_dict()
    # tied weights once; a buffer the model builds itself (ALiBi's slopes: persistent=False) is in no file
    implied = sum(p.numel() for p in meta.parameters()) + sum(b.numel() for n, b in meta.named_buffers() if n in shapes)
    held = held_elements(weights, key, path)
    if implied > held:
        raise ConfigError(f"{key}={str(path)!r} describes a model of {implied:,} parameters but holds tensors for "
                          f"{held:,}; it is not a whole attnexp checkpoint")
    check_shapes({"state_dict": weights}, shapes, key, path)
    check_finite(weights, key, path)
    model = build("cpu")
    model.load_state_dict(weights)
    return model.eval(), hp
