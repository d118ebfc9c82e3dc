"""The command line, read once before Hydra runs: Hydra's own parse of the flags and overrides, the
config they compose (through the checked composition of attnexp.launch.command_line.precheck; a
sweep's: its fixed part), and what follows from that config alone: the run's or sweep's folder,
whether the user named it, the resume setting, run or sweep (hydra.mode), how many jobs run side by side. Every
decision the command line takes before Hydra reads this object, never the override strings (text
stays text only where it is the subject: a resume command quoted back, an override echoed in an
error). As lightning-hydra-template's train.py trusts the composed `cfg`, and torchtitan parses once
and then builds.

    python -m attnexp train attention=rotary
      -> cli.train.train_cli: Plan(argv) -> precheck composes it once (plan.cfg) -> plan.folder checked
      -> Hydra runs cli.train.job(cfg) -> launch.load.load_run(cfg) -> training.fit.train(run)
      -> model.Transformer(...) builds attention.registry's "rotary" -> attention.variants.rotary.Rotary
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path

from omegaconf import OmegaConf, open_dict, read_write

from attnexp.config import ConfigError


@dataclass
class Plan:
    flags: object  # Hydra's parsed arguments (attnexp.compat.hydra.args_parser): multirun, cfg, overrides, ...
    cfg: object | None = None  # the precheck's composition (a sweep's fixed part), Hydra's node included
    jobs: int = 1  # the jobs a basic sweep launches (the precheck composed each)
    run: object | None = None  # a single run's Run, as the precheck validated it
    started: datetime = field(default_factory=datetime.now)  # what each ${now:...} of the folder reads

    @classmethod
    def of(cls, argv: list[str]) -> Plan:
        """Hydra's parse of `argv`, flags and overrides in any order; a flag it refuses is a ConfigError."""
        from attnexp.compat.hydra import args_parser

        def refuse(message: str):  # argparse's own exit printed its seven-line usage under the name __main__.py
            raise ConfigError(f"{message} (python -m attnexp train --hydra-help lists the flags)")

        parser = args_parser()
        parser.error = refuse
        return cls(parser.parse_intermixed_args(argv))

    @property
    def overrides(self) -> list[str]:
        return list(self.flags.overrides)

    @property
    def again(self) -> list[str]:
        """What a command that continues this one repeats (a "Resume with:" line): --config-dir, made
        absolute, and the overrides."""
        conf = self.flags.config_dir
        return [*([f"--config-dir={Path(conf).expanduser().resolve()}"] if conf else []), *self.overrides]

    @property
    def multirun(self) -> bool:
        return bool(self.flags.multirun)

    @cached_property
    def _dir(self) -> tuple[str, str, bool]:
        """(folder, the key that set it, literal): the composed hydra.run.dir (hydra.sweep.dir) up to its
        first ${now:...}, resolved once; literal when it has none (the run goes exactly there)."""
        raw = self._raw_dir
        prefix, now, _ = raw.partition("${now:")
        paths_key = "paths.sweep_dir" if self.multirun else "paths.log_dir"
        key = paths_key if prefix.startswith("${" + paths_key + "}") else f"hydra.{'sweep' if self.multirun else 'run'}.dir"
        value = self._resolved(prefix, key)
        # what an unset variable would leave empty: the folder named whole, or the paths key a dated
        # folder starts from; a dated folder's prefix of one's own is left to it
        named = value if not now else (str(OmegaConf.select(self.cfg, key)) if key == paths_key else None)
        if named is not None and not named.strip():  # `hydra.run.dir=$OUT`, $OUT unset: the working folder, or /
            where = "under /" if now else "in the folder you run in"
            raise ConfigError(f"{key} is empty (an unset shell variable?); runs would go {where}: give a folder, {key}=DIR")
        return value, key, not now

    @property
    def _raw_dir(self) -> str:
        return str(OmegaConf.to_container(self.cfg.hydra["sweep" if self.multirun else "run"], resolve=False)["dir"])

    def _resolved(self, text: str, key: str) -> str:
        """`text` resolved in the composed config, as Hydra will resolve it; one that does not resolve is one line."""
        with read_write(self.cfg), open_dict(self.cfg):
            self.cfg["_attnexp_folder_"] = text
            try:
                return str(self.cfg["_attnexp_folder_"])
            except Exception as e:  # noqa: BLE001 - an interpolation that does not resolve (omegaconf's errors)
                raise ConfigError(f"{key}: {' '.join(str(e).split())}") from None
            finally:
                del self.cfg["_attnexp_folder_"]

    @property
    def folder(self) -> Path:
        """Where Hydra makes the run's folder (a sweep: the folder its date/time folder goes in, or the
        sweep's own when hydra.sweep.dir names it)."""
        return Path(self._dir[0] or ".")

    @property
    def folder_key(self) -> str:
        return self._dir[1]

    @property
    def literal(self) -> bool:
        """Whether the folder is named whole (hydra.run.dir=DIR), not dated by Hydra."""
        return self._dir[2]

    @property
    def sweep_root(self) -> Path:
        """The sweep's folder: the composed hydra.sweep.dir whole, each ${now:FORMAT} read at the command's
        start (Hydra's resolver reads the clock), named here rather than by Hydra so this process knows it when
        the jobs ran elsewhere (submitit)."""
        stamped = re.sub(r"\$\{now:([^}]*)\}", lambda m: self.started.strftime(m.group(1)), self._raw_dir)
        return (self.folder if self.literal else Path(self._resolved(stamped, self.folder_key))).resolve()

    @property
    def resume(self) -> str | None:
        return OmegaConf.select(self.cfg, "resume", default=None) or None

    @property
    def mode(self):
        """The composed hydra.mode (None unless a config sets it): what Hydra's run reads to run or sweep."""
        return OmegaConf.select(self.cfg, "hydra.mode")

    @property
    def sweeps_unasked(self) -> bool:
        """hydra.mode=MULTIRUN in the composed config without -m: Hydra will sweep, so the command line
        plans it as -m (--cfg and --info show the config, as Hydra does)."""
        from hydra.types import RunMode

        return self.mode == RunMode.MULTIRUN and not (self.multirun or self.flags.cfg or self.flags.info)

    @property
    def parallel(self) -> int | None:
        """How many jobs a launcher that runs them side by side here (submitit_local) starts at once: the
        Optuna sweeper's n_jobs, or the sweep's jobs; None for one at a time."""
        if "LocalLauncher" not in str(OmegaConf.select(self.cfg, "hydra.launcher._target_") or ""):
            return None
        n_jobs = OmegaConf.select(self.cfg, "hydra.sweeper.n_jobs")
        return int(n_jobs) if n_jobs else self.jobs

    @property
    def hydra_subdir(self) -> str | None:
        """The composed hydra.output_subdir (.hydra), where Hydra writes a job's config files."""
        return OmegaConf.select(self.cfg, "hydra.output_subdir")

    @property
    def cpus_given(self) -> bool:
        return OmegaConf.select(self.cfg, "hydra.launcher.cpus_per_task") is not None
