"""The command line checked before Hydra runs anything, so a mistake is one line and no run
folder: Hydra's own messages (a typo in a key, an unknown option, a value of the wrong type) are
rewritten into one sentence that names the fix, with the closest valid key suggested."""

from __future__ import annotations

import difflib
import re
from dataclasses import fields

from omegaconf import OmegaConf

from attnexp.config import ConfigError, split_override
from attnexp.config.paths import conf_dir
from attnexp.launch.compose import compose, register_schemas, search_path

_TYPES = {"Integer": "an integer", "Float": "a number", "Boolean": "true or false", "bool": "true or false"}


def explain(e: Exception, overrides: list[str]) -> str:
    """One line for an exception Hydra raised while composing `overrides`."""
    from hydra.errors import MissingConfigException, OverrideParseException

    text = str(e)
    if isinstance(e, OverrideParseException):
        bad = re.search(r"Error parsing override '(.*?)'", text)
        name = bad.group(1) if bad else unparsable(overrides)
        what = (text.splitlines()[1:2] or [""])[0] if bad else text.splitlines()[0].split(":", 1)[0]
        return (f"cannot read the override {name!r} ({what}); write key=value, e.g. model.n_layers=4, and quote a "
                f"value holding spaces or any of ?#=(),[]{{}}: key='a value' (python -m attnexp train --help lists keys)")
    if isinstance(e, MissingConfigException) and e.missing_cfg_file and "/" in e.missing_cfg_file:
        group, name = e.missing_cfg_file.rsplit("/", 1)
        if group == "hydra/launcher" and name.startswith("submitit"):  # what slurm.yaml / local_parallel.yaml extend
            return ("hydra/launcher=slurm and hydra/launcher=local_parallel run through Hydra's submitit launcher, "
                    "which is not installed: pip install 'attnexp[cluster]' (from a clone: pip install -e '.[cluster]')")
        near = difflib.get_close_matches(name, e.options or [], n=1, cutoff=0.6)
        return (f"{group}={name} is not an option of {group}" + (f" (did you mean {group}={near[0]}?)" if near else "")
                + f"; choose one of: {', '.join(e.options or [])}")
    m = re.match(r"Could not override '(.*?)'", text)
    if m:
        return unknown_key(m.group(1), overrides)
    m = re.match(r"Error merging override (.*)", text)
    if m and m.group(1).startswith("hydra.sweeper.") and optuna_sweeps(composed_without(m.group(1), overrides)):
        return sweeper_key(split_override(m.group(1))[0])
    if m and e.__cause__ is not None:
        cause = str(e.__cause__).splitlines()[0]
        kind = re.search(r"could not be converted to (\w+)|is not a valid (\w+)", cause)
        want = _TYPES.get(next((g for g in kind.groups() if g), ""), None) if kind else None
        return f"{m.group(1)}: must be {want}" if want else f"{m.group(1)}: {cause}"
    return " ".join(text.split("\n\n")[0].split())


def unparsable(overrides: list[str]) -> str:
    """The first override Hydra's grammar cannot read (its lexer's errors do not name it)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    for o in overrides:
        try:
            parser.parse_override(o)
        except Exception:  # noqa: BLE001 - the grammar's own exceptions
            return o
    return " ".join(overrides)


def _keys(node, prefix: str = "") -> list[str]:
    out = []
    for k, v in node.items():
        key = f"{prefix}{k}"
        out += _keys(v, key + ".") if isinstance(v, dict) else [key]
    return out


# What users of lightning-hydra-template, nanoGPT and Lightning type, and attnexp's key for it
EQUIVALENTS = {
    "ckpt_path": "resume=PATH (continue that run) or model.init=PATH (a new run from its weights)",
    "model.optimizer.lr": "optim.lr", "model.optimizer.weight_decay": "optim.weight_decay", "optimizer.lr": "optim.lr",
    "lr": "optim.lr", "learning_rate": "optim.lr", "weight_decay": "optim.weight_decay", "batch_size": "data.batch_size",
    "model.scheduler": "optim.warmup_steps / optim.min_lr_ratio (warmup + cosine)", "max_iters": "trainer.max_steps",
    "n_layer": "model.n_layers", "n_head": "model.n_heads", "n_embd": "model.d_model", "block_size": "data.max_len",
    # lightning-hydra-template's callbacks group: attnexp's checkpoint settings, not callbacks of their own
    "callbacks.model_checkpoint.monitor": "checkpoint.monitor", "callbacks.model_checkpoint.mode": "checkpoint.mode",
    "callbacks.model_checkpoint.every_n_train_steps": "checkpoint.every_n_steps",
    "callbacks.early_stopping.patience": "checkpoint.patience",
    "callbacks.early_stopping.monitor": "checkpoint.monitor (early stopping watches the checkpoint's metric)",
    "callbacks.early_stopping.mode": "checkpoint.mode", "callbacks.model_summary.max_depth": "trainer.enable_model_summary=true",
    "callbacks.rich_progress_bar": "trainer.enable_progress_bar",
}


def close_key(key: str, keys: list[str]) -> str | None:
    """A key that is a near spelling of `key`, in the same section with a near last name (so
    model.optimizer.lr does not become model.compile), or None."""
    section, _, last = key.rpartition(".")
    for cand in difflib.get_close_matches(key, keys, n=5, cutoff=0.75):
        c_section, _, c_last = cand.rpartition(".")
        if c_section == section and difflib.SequenceMatcher(None, last, c_last).ratio() >= 0.75:
            return cand
    return None


PRUNER_KEYS = ("n_startup_trials", "n_warmup_steps")  # attnexp's sweeper keys that belong to its median pruner


def sweeper_key(key: str) -> str:
    """A key attnexp's Optuna sweeper does not take (lightning-hydra-template's sampler/pruner nodes):
    the keys it does take, and the one meant where there is one."""
    from hydra_plugins.attnexp_optuna_sweeper.sweeper import AttnexpOptunaSweeperConf

    keys = [f.name for f in fields(AttnexpOptunaSweeperConf) if not f.name.startswith("_") and f.name not in ("trial", "origin")]
    last = key.rsplit(".", 1)[-1]
    meant = f" (did you mean hydra.sweeper.{last}?)" if last in keys and key != f"hydra.sweeper.{last}" else ""
    if key.startswith("hydra.sweeper.sampler.") and last in PRUNER_KEYS:  # LHT's TPE setting, not the pruner's
        meant = (f" (attnexp's sampler takes only hydra.sweeper.sampler=tpe|random and hydra.sweeper.seed; "
                 f"hydra.sweeper.{last} is the median pruner's)")
    return (f"{key} is not a key of attnexp's Optuna sweeper{meant}; it takes hydra.sweeper.KEY for KEY in: "
            f"{', '.join(keys)} (sampler=tpe|random, pruner=median|none; the search space in hydra.sweeper.params)")


def composed_without(bad: str, overrides: list[str]):
    """The config the command line composes without the override of the key Hydra refused (`bad`: the
    override or its key), so its message is decided by what the rest chose (an experiment or
    local/default.yaml may pick the sweeper as well as hparams_search=optuna typed); None where the rest
    fails too."""
    key = split_override(bad)[0]
    try:
        return compose([o for o in overrides if split_override(o)[0] != key])
    except Exception:  # noqa: BLE001 - another mistake: the message says what is known
        return None


def sweeper_of(cfg) -> str:
    """The composed config's sweeper class ("" where none is composed)."""
    return str(OmegaConf.select(cfg, "hydra.sweeper._target_") or "") if cfg is not None else ""


def optuna_sweeps(cfg) -> bool:
    return "attnexp_optuna_sweeper" in sweeper_of(cfg)


def unknown_key(key: str, overrides: list[str]) -> str:
    cfg = composed_without(key, overrides)
    keys = [k for k in _keys(OmegaConf.to_container(cfg, resolve=False)) if not k.startswith("hydra.")] if cfg else []
    if key.startswith("hydra.sweeper.") and optuna_sweeps(cfg):
        return sweeper_key(key)
    if key in EQUIVALENTS:
        return f"{key} is not a config key; attnexp's is {EQUIVALENTS[key]}"
    group = close_group(key)
    if group:  # a misspelt group (atention=rotary) got no suggestion where a misspelt key did
        value = next((split_override(o)[1] for o in overrides if split_override(o)[0] == key), "...")
        return f"{key} is not a config group or key; did you mean {group}={value}? (train --help lists the groups)"
    hint = f"; did you mean {close_key(key, keys)}?" if close_key(key, keys) else \
        "; `python -m attnexp train --cfg job` prints every key"
    extra = ""
    if key.startswith("trainer."):
        extra = f" (another argument of Lightning's Trainer needs a '+': +{key}=...)"
    elif key.startswith("callbacks."):
        extra = f" (a new callback needs a '+': +{key}=...)"
    return f"{key} is not a config key{hint}{extra}"


def close_group(key: str) -> str | None:
    """A config group whose name is a near spelling of `key` (a top-level name), or None."""
    if "." in key:
        return None
    groups = sorted(p.name for p in conf_dir().iterdir() if p.is_dir() and p.name != "hydra") + ["local"]
    near = difflib.get_close_matches(key, groups, n=1, cutoff=0.7)
    return near[0] if near and near[0] != key else None


def sweep_jobs(overrides: list[str]) -> list[list[str]]:
    """The override list of every job a basic multirun sweep would launch."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from attnexp.compat.hydra import config_loader
    from attnexp.compat.hydra import sweep_jobs as basic_sweeper_jobs

    register_schemas()  # imports our sweeper plugin first: Hydra's plugin scan cannot import its dataclasses itself
    # the config loader answers glob(): `-m experiment=glob(*)` lists conf/experiment/ and a user's
    # folder (without it, Hydra's parser says "ConfigLoader is not set")
    loader = config_loader(search_path(overrides))
    parsed = OverridesParser.create(config_loader=loader).parse_overrides(overrides)
    return basic_sweeper_jobs([o for o in parsed if o.key_or_group != "hydra/sweeper"])  # Hydra's reading, not ours


def compose_checked(overrides: list[str], out_dir: str = "unused"):
    """compose(), with Hydra's errors as one-line ConfigErrors."""
    from hydra.errors import HydraException

    try:
        return compose(overrides, out_dir)
    except HydraException as e:
        raise ConfigError(explain(e, overrides)) from None
    except Exception as e:  # e.g. an interpolation to a missing key
        raise ConfigError(" ".join(str(e).split("\n")[0].split())) from None


def precheck(overrides: list[str], multirun: bool, training: bool = True, plan=None) -> str | None:
    """The first problem with the command line, in one line, or None. A single run is validated
    whole (a bad value leaves no run folder); a sweep has each job's config composed, since Hydra
    would stop the whole sweep at a job that does not compose (a job whose settings are merely
    impossible runs and records its config error, so the rest of the grid still trains).
    `plan` (attnexp.launch.plan.Plan) receives the run's composed config (a sweep's: its fixed part's)
    and the number of jobs, so the command line decides from them instead of composing again."""
    from hydra.types import RunMode

    from attnexp.launch.load import load_run

    if any(o.lstrip("+").split("=", 1)[0] == "paths.output_dir" for o in overrides):
        return ("paths.output_dir is the folder attnexp gives each run (Hydra's job folder), not a setting; choose "
                "the run's folder with hydra.run.dir=DIR (a sweep's: hydra.sweep.dir=DIR), or where runs go with "
                "paths.log_dir=DIR")
    try:
        if not multirun:
            cfg = compose_checked(overrides)
            if plan is not None:
                plan.cfg = cfg
            if training and OmegaConf.select(cfg, "hydra.mode") == RunMode.MULTIRUN:
                return None  # Hydra sweeps this config: the command line plans it as -m, and checks it as a sweep
            run = load_run(cfg)
            if plan is not None:
                plan.run = run
            if training and optuna_sweeps(cfg):
                return ("hparams_search=optuna searches over many runs: add -m (python -m attnexp train -m "
                        "hparams_search=optuna ...); without it this would be one ordinary run")
            return None
        from hydra.core.override_parser.overrides_parser import OverridesParser

        parsed = OverridesParser.create().parse_overrides(overrides)  # Hydra's reading of each, not ours
        fixed = [o.input_line for o in parsed if not o.is_sweep_override()]
        # which sweeper runs is the composed config's answer (hparams_search=optuna sets it in a defaults list)
        cfg = compose_checked(fixed)
        basic = "BasicSweeper" in sweeper_of(cfg)
        jobs = sweep_jobs(overrides) if basic else [fixed]
        if plan is not None:
            plan.cfg, plan.jobs = cfg, len(jobs)
    except ConfigError as e:
        return str(e)
    except Exception as e:  # the sweep syntax itself
        return explain(e, overrides)
    for n, job in enumerate(jobs):
        try:
            cfg = compose_checked(job)
        except ConfigError as e:
            return f"in job {n} of the sweep ({' '.join(job)}): {e}" if len(jobs) > 1 else str(e)
        if n == 0:
            from hydra_plugins.attnexp_optuna_sweeper.sweeper import precheck as sweeper_precheck

            problem = sweeper_precheck(cfg.hydra)
            if problem:
                return problem
    return None
