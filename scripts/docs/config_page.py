#!/usr/bin/env python
"""docs/config_groups.md from conf/: every option of every config group, with the first comment of
its yaml (what it is) or else the settings it makes; and the groups table that README.md and
docs/configuration.md both show (between GROUPS_START and GROUPS_END), its options listed from
conf/ and its default from conf/config.yaml. Generated, never edited by hand; tests/unit/test_docs.py
checks that the committed pages are what this writes.

    python scripts/docs/config_page.py            # rewrite docs/config_groups.md and both tables
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONF = REPO / "conf"
OUT = REPO / "docs" / "config_groups.md"


def about(path: Path) -> str:
    """The yaml's first comment sentence (not a @package line, not an indented example command),
    else what it sets."""
    import yaml

    comments = []
    for line in path.read_text().splitlines():  # the comment the file opens with
        if not line.startswith("#"):
            break
        if "@package" not in line and not line.startswith("#  "):
            comments.append(line.lstrip("# ").strip())
            if comments[-1].endswith((".", ":")):  # a sentence that ends with its line
                break
    if comments:
        text = " ".join(comments)
        return text.split(". ")[0].rstrip(".:") + "."
    node = yaml.safe_load(path.read_text()) or {}
    flat = []

    def walk(d, prefix=""):
        for k, v in d.items():
            if k in ("defaults", "_target_"):
                continue
            if isinstance(v, dict):
                walk(v, f"{prefix}{k}.")
            else:
                flat.append(f"`{prefix}{k}={v}`")

    walk(node if isinstance(node, dict) else {})
    return ", ".join(flat[:6]) + (" ..." if len(flat) > 6 else "") if flat else "its group's defaults"


def cell(text: str, where: Path) -> str:
    """`text` as one Markdown table cell: `<`, `>` and `&` escaped outside code spans (else the page
    eats `<date>` as HTML), `|` escaped outside them; a cell that cannot be one row (a line break,
    a `|` inside a code span, which Python-Markdown shows as a literal `\\|`) is refused, naming
    the yaml to fix."""
    import html

    if "\n" in text:
        raise ValueError(f"{where}: its description spans lines; give the yaml an opening comment of one sentence")
    parts = text.split("`")
    if len(parts) % 2 == 0:
        raise ValueError(f"{where}: an unclosed ` in its description")
    for i, part in enumerate(parts):
        if i % 2 and "|" in part:
            raise ValueError(f"{where}: a '|' inside `{part}` breaks the table row; write the choices as separate "
                             f"code spans (`a` or `b`)")
        if not i % 2:
            parts[i] = html.escape(part, quote=False).replace("|", "\\|")
    return "`".join(parts)


def variant(path: Path) -> str:
    """An attention option: the variant it selects (the registry's own summary) and what it sets."""
    import yaml

    from attnexp import attention
    from attnexp.config import AttentionConfig

    node = yaml.safe_load(path.read_text()) or {}
    cls = attention.get(str(node.get("name")))
    if path.stem in ("causal", "bidirectional"):  # they read as masks, but each picks a variant and a mask
        mask = node.get("mask", AttentionConfig.mask)
        return f"`{cls.name}` with `mask={mask}`: a preset, not a mask for any variant (`attention={{name}}` " \
               f"`attention.mask={mask}` gives another variant that mask); {cls.summary}"
    sets = ", ".join(f"`{k}={v}`" for k, v in node.items() if k not in ("defaults", "name"))
    return f"`{cls.name}`: {cls.summary}" + (f" ({sets})" if sets else "")


def page() -> str:
    lines = ["# Every option of every config group", "",
             "Generated from `conf/` by `python scripts/docs/config_page.py` (do not edit by hand): each option with",
             "the first comment of its yaml, or the settings it makes. `python -m attnexp train --help` lists the",
             "same; `--cfg job` prints a composed config.", ""]
    for group in sorted(p for p in CONF.rglob("*") if p.is_dir() and any(p.glob("*.yaml"))):
        name = group.relative_to(CONF).as_posix()
        lines += [f"## `{name}`", "", "| option | what it is |", "| --- | --- |"]
        for option in sorted(group.glob("*.yaml")):
            text = variant(option) if name == "attention" else about(option)
            lines.append(f"| `{name}={option.stem}` | {cell(text, option.relative_to(REPO))} |")
        lines.append("")
    return "\n".join(lines)


# The groups table: per group, a short note on some options (the rest are listed bare, from conf/) and
# what the group picks. One place for README.md and docs/configuration.md (they had drifted apart).
GROUPS = {
    "attention": ({"bidirectional": "`mha`, as `causal`, with a bidirectional mask",
                   "mqa": "gqa with one key/value head", "smeared": "Olsson et al.'s smeared keys"},
                  "the mechanism (`python -m attnexp variants` lists them); `attention.mask=causal` or `bidirectional` and "
                  "`attention.backend=eager`, `sdpa` or `flex` override any of them"),
    "model": ({"tiny": "d=64, 4 heads, 2 layers", "gpt2": "GPT-2 small's shape: d=768, 12 heads, 12 layers"},
              "sizes: `model.d_model`, `model.n_heads`, `model.n_layers`, `model.max_len`, `model.dropout`, `model.pos_emb`"),
    "data": ({}, "`toy`: the built-in corpus, or `data.corpus=path/to/text.txt` (one sentence per line); `newsgroups`: "
                 "20 Newsgroups; `text`: 20 Newsgroups as one token stream for a language model (bytes, or "
                 "`data.tokenizer_model=bpe`; windows of `data.max_len`); `synthetic`: `data.kind=copy`, `reverse`, `sort`, "
                 "`recall` or `induction`"),
    "task": ({}, "`lm`: next-token prediction when causal, masked-token when bidirectional (`task.objective=next` or "
                 "`masked` to choose); `classify`: pooled (`task.pooling=last`, `cls` or `mean`)"),
    "trainer": ({"default": "auto device", "ddp_sim": "2 CPU processes"},
                "a `lightning.pytorch.Trainer`: `trainer.max_epochs=3`, `trainer.fast_dev_run=true`, `trainer.strategy=...`"),
    "logger": ({"wandb": "offline", "mlflow": "`.[mlflow]`: a local SQLite store, or a tracking server"}, "where metrics go"),
    "callbacks": ({}, "lightning-hydra-template's spelling: both add nothing; checkpoints and early stopping are "
                      "`checkpoint.*`, an extra callback `+callbacks.NAME._target_=CLASS`"),
    "paths": ({}, "where things go: `paths.log_dir` (runs, `outputs`), `paths.sweep_dir` (`multirun`, and the Optuna "
                  "studies), `paths.cache_dir` (tokenized data); `paths.root_dir` (the folder you run in, or `$PROJECT_ROOT`) "
                  "and `paths.data_dir` (its `data/`) as lightning-hydra-template's anchors"),
    "experiment": ({"newsgroups_bert": "fine-tune a pretrained BERT-family encoder: `model.init=hf:...`",
                    "newsgroups_minilm": "fine-tune the shared all-MiniLM-L6-v2",
                    "induction_heads": "Olsson et al.'s setting: a 2-layer attention-only rotary model on repeated "
                                       "random tokens, the heads read every 25 steps",
                    "induction_text": "the same model on 20 Newsgroups bytes, every window ending in a planted copy "
                                      "of an earlier span of itself"},
                   "presets that set several groups at once"),
    "hparams_search": ({}, "an Optuna study over lr, warmup, dropout and width (with `-m`)"),
    "local": ({}, "your machine's settings (data folders, `trainer.accelerator`, a tracking URI) in `local/default.yaml`, "
                  "applied after the experiment and before `debug` and the command line: in a checkout's `conf/local/` "
                  "(git-ignored, never shipped in a wheel) or in your own config folder (`--config-dir DIR`)"),
    "debug": ({"default": "one epoch on the CPU, anomaly detection", "fdr": "fast dev run", "overfit": "one batch",
               "profiler": "one epoch, Lightning's simple profiler", "limit": "20 + 5 batches an epoch"},
              "lightning-hydra-template's debug presets, no logger"),
    "hydra/launcher": ({"basic": "Hydra's"}, "where a sweep's jobs run: one after another here, side by side here, or on "
                                             "a SLURM cluster (`pip install -e '.[cluster]'`)"),
}
GROUPS_START = "<!-- groups table: generated by scripts/docs/config_page.py from conf/, do not edit -->"
GROUPS_END = "<!-- end of the groups table -->"
TABLE_PAGES = (REPO / "README.md", REPO / "docs" / "configuration.md")


def defaults() -> dict[str, str | None]:
    """conf/config.yaml's defaults list: each group's default option (None for `group: null`)."""
    import yaml

    out = {}
    for entry in yaml.safe_load((CONF / "config.yaml").read_text())["defaults"]:
        if isinstance(entry, dict):
            (key, value), = entry.items()
            out[key.replace("optional ", "").replace("override ", "")] = value
    return out


def group_options(group: str, first: str | None) -> list[str]:
    """The options of a group as conf/ holds them (hydra/launcher's are the plugin's, in conf/hydra/launcher);
    the default (`first`) first, then the rest by name."""
    notes, _ = GROUPS[group]
    found = sorted(p.stem for p in (CONF / group).glob("*.yaml"))
    if group == "hydra/launcher":
        found = ["basic", *found]
    if group == "local":
        found = ["default"]  # optional: your file, never in conf/ of a wheel
    stale = sorted(set(notes) - set(found))
    if stale:
        raise ValueError(f"scripts/docs/config_page.py: GROUPS[{group!r}] notes options conf/{group} does not hold: {stale}")
    return sorted(found, key=lambda o: (o != first, o))


def groups_table() -> str:
    rows = ["| group | options | what it picks |", "| --- | --- | --- |"]
    given = defaults()
    for group, (notes, picks) in GROUPS.items():
        shown = []
        for o in group_options(group, given.get(group)):
            extra = [x for x in ("default" if given.get(group) == o else "", notes.get(o, "")) if x]
            if group == "local":
                extra = ["optional"]
            shown.append(f"`{o}`" + (f" ({'; '.join(extra)})" if extra else ""))
        rows.append(f"| `{group}` | {', '.join(shown)} | {cell(picks, CONF / group)} |")
    return "\n".join(rows)


def with_table(text: str, where: Path) -> str:
    """`text` (a page) with its groups table made anew between the two markers."""
    if GROUPS_START not in text or GROUPS_END not in text:
        raise ValueError(f"{where}: no groups table markers ({GROUPS_START} ... {GROUPS_END})")
    head, rest = text.split(GROUPS_START, 1)
    _, tail = rest.split(GROUPS_END, 1)
    return f"{head}{GROUPS_START}\n{groups_table()}\n{GROUPS_END}{tail}"


if __name__ == "__main__":
    OUT.write_text(page())
    print(f"wrote {OUT}")
    for path in TABLE_PAGES:
        path.write_text(with_table(path.read_text(), path))
        print(f"wrote the groups table of {path.relative_to(REPO)}")
