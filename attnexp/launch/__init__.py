"""From Hydra to a typed `Run`: the conf/ folder and schemas (`compose`), the command line's
overrides checked in one line (`overrides`), what a sweep adds for its jobs (`sweeps`) and the
validated run with its job context (`load`). The only Hydra-aware layer besides the sweeper plugin
(hydra_plugins/attnexp_optuna_sweeper)."""
