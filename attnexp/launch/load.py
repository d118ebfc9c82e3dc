"""The composed DictConfig, validated once into a typed `Run` (no Lightning import here, so a typo
in an override is reported in about a second), and the job's context read from Hydra."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from attnexp.config import (
    AttentionConfig,
    CheckpointConfig,
    ExtrasConfig,
    JobContext,
    MapsConfig,
    ModelConfig,
    OptimConfig,
    Run,
    TaskConfig,
    TrainerConfig,
    TrialRef,
    check,
    from_dict,
    monitored_metrics,
    split_override,
)
from attnexp.data.configs import load_data_config

log = logging.getLogger("attnexp")

# torch, the attention registry (torch modules) and the checkpoint reader are imported where they
# are needed, after the checks that need none of them: a typo or an impossible size is one line in
# well under a second, not after torch's 2 s import.


@dataclass
class TopLevel:  # conf/config.yaml's own keys
    seed: int | None  # None: an unseeded run, which draws one (recorded in summary.json, so it can be repeated)
    resume: str | None
    test: bool
    threads: int | None
    tags: list[str]


def section(cfg: DictConfig, key: str) -> dict:
    """cfg[key] as a plain, resolved dict ({} when absent)."""
    node = cfg.get(key)
    return {} if node is None else OmegaConf.to_container(node, resolve=True)


def job_context(started: float | None = None) -> JobContext:
    """What Hydra knows about the job being run (or composed): its choices and overrides, the
    sweep it belongs to and the keys that sweep varies (the command line keeps only those in a
    job's folder name: every other override is in override_dirname's exclude_keys), the CPUs its
    launcher gives it, and the Optuna trial it runs for. Empty outside Hydra."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized():
        return JobContext(started=started)
    hc = HydraConfig.get()
    choices = {k: v for k, v in hc.runtime.choices.items() if not k.startswith("hydra")}
    overrides = list(hc.overrides.task)
    multirun = hc.mode == RunMode.MULTIRUN
    fixed = set(OmegaConf.select(hc, "job.config.override_dirname.exclude_keys") or [])
    swept = [k for k in (split_override(o)[0] for o in overrides) if k not in fixed] if multirun else []
    cpus = OmegaConf.select(hc, "launcher.cpus_per_task")
    trial = None
    if OmegaConf.select(hc, "sweeper.trial") is not None and OmegaConf.select(hc, "sweeper.storage"):
        sw = hc.sweeper
        trial = TrialRef(str(sw.storage), str(sw.study_name), int(sw.trial), str(sw.pruner), int(sw.n_startup_trials),
                         int(sw.n_warmup_steps))
    return JobContext(choices=choices, overrides=overrides, sweep_dir=str(Path(hc.sweep.dir).resolve()) if multirun else None,
                      swept=swept, cpus=int(cpus) if cpus else None, trial=trial, started=started)


def model_and_attention(cfg: DictConfig, data, trainer: TrainerConfig):
    """The model and attention settings (a pretrained checkpoint's own, with model.init), checked;
    the data config, given the checkpoint's tokenizer where it has one."""
    m = from_dict(ModelConfig, section(cfg, "model"), "model")
    a = from_dict(AttentionConfig, section(cfg, "attention"), "attention")
    if m.init and m.init.startswith("hf:"):  # pretrained: sizes, norm, attention layout and tokenizer are the checkpoint's
        from attnexp.model import pretrained

        m.validate()
        source = pretrained.source_of(m.init)
        m, a = pretrained.configs(source, m, a)
        check(hasattr(data, "tokenizer"), f"model.init={m.init} needs text tokenized with the checkpoint's tokenizer: "
                                          f"data=newsgroups (e.g. experiment=newsgroups_bert), not data={data.name}")
        if data.tokenizer is None:
            spec = pretrained.tokenizer_of(source, getattr(data, "cache_dir", None))
            data = replace(data, tokenizer=spec, lowercase=False)  # its own normalizer lowercases
    m.validate()
    from attnexp import attention
    from attnexp.training.device import training_on_cpu

    a = attention.validate(a, m, training_on_cpu=training_on_cpu(trainer))
    if data.pad_to_multiple_of is None and a.backend == "flex":
        # FlexAttention compiles once per sequence length: rounded batch lengths keep that to a few shapes
        data = replace(data, pad_to_multiple_of=128)
    check(data.max_len <= m.max_len,
          f"data.max_len={data.max_len} is longer than model.max_len={m.max_len}; raise model.max_len or lower data.max_len")
    return m, a, data


def check_resume(resume: str | None, m: ModelConfig, a: AttentionConfig, t: TaskConfig) -> None:
    """resume=PATH and model.init=PATH.ckpt name a checkpoint of the model these settings build
    (resume=auto is checked when the run folder's newest checkpoint is picked, before training)."""
    for key, path in (("resume", resume), ("model.init", m.init)):
        if path in (None, "auto") or (key == "model.init" and path.startswith("hf:")):
            continue
        from attnexp.model import checkpoints

        ckpt = checkpoints.load(path, key)
        problem = checkpoints.mismatch(ckpt, asdict(m), asdict(a), asdict(t), key, path)
        check(problem is None, problem or "")
        if key == "resume":
            checkpoints.check_resumable(ckpt, key, path)


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def load_run(cfg: DictConfig, started: float | None = None) -> Run:
    """The one place a DictConfig turns into typed objects; every mistake is a ConfigError.
    `started`: when the command started (time.time()), for the run's start-up time."""
    t = from_dict(TaskConfig, section(cfg, "task"), "task")
    o = from_dict(OptimConfig, section(cfg, "optim"), "optim")
    trainer = TrainerConfig.from_raw(section(cfg, "trainer"))
    trainer.validate()
    check(str(trainer.accelerator) not in ("gpu", "cuda") or cuda_available(),
          f"trainer.accelerator={trainer.accelerator} but no CUDA GPU is visible here; use trainer.accelerator=auto "
          f"(a GPU when there is one) or trainer=cpu")
    data = load_data_config(section(cfg, "data"), t)  # before the model: model.max_len follows data.max_len
    m, a, data = model_and_attention(cfg, data, trainer)
    t.validate(a)
    o.validate()
    check(not o.freeze_encoder or t.name == "classify", "optim.freeze_encoder=true trains the task head alone, which "
          "task=lm ties to the frozen embedding; use it with task=classify (a classifier on a frozen encoder)")
    top = from_dict(TopLevel, {k: cfg.get(k) for k in ("seed", "resume", "test", "threads")} |
                    {"tags": [str(t) for t in (OmegaConf.to_container(cfg.tags) if OmegaConf.is_config(cfg.get("tags"))
                                               else cfg.get("tags") or [])]}, "")
    check(top.threads is None or top.threads >= 1, f"threads={top.threads} must be >= 1 (or null: automatic)")
    if top.seed is None:
        import secrets

        top.seed = secrets.randbelow(2**31)
    check_resume(top.resume, m, a, t)
    maps = from_dict(MapsConfig, section(cfg, "maps"), "maps")
    maps.validate()
    check(not maps.llc or (t.name == "lm" and a.causal), "maps.llc=true estimates the LLC of a next-token loss; use it "
          "with task=lm and causal attention (or set maps.llc=false)")
    ckpt = from_dict(CheckpointConfig, section(cfg, "checkpoint"), "checkpoint")
    ckpt = ckpt.resolved(monitored_metrics(t.name, data.aligned(t), maps.enabled))
    extras = from_dict(ExtrasConfig, section(cfg, "extras"), "extras")
    check(not extras.enforce_tags or top.tags, "extras.enforce_tags=true and this run has no tags; give some, e.g. "
                                               "tags=[baseline,first], or extras.enforce_tags=false")
    resolved = {k: section(cfg, k) if OmegaConf.is_config(cfg[k]) else cfg[k] for k in cfg if k != "hydra"}
    from attnexp.training.loggers import installed_loggers  # its adapters import no Lightning

    job = job_context(started)
    return Run(a, m, t.resolved(a), o, data, trainer, top.seed, top.resume, top.test, maps, ckpt,
               loggers=installed_loggers(section(cfg, "logger"), job.choices.get("logger")),
               callbacks=section(cfg, "callbacks"), out_dir=Path(cfg.paths.output_dir),
               config=resolved, threads=top.threads, job=job, tags=top.tags, extras=extras)
