"""The Lightning runtime: `fit.train(run)` (short), what it is built from (`build`: callbacks,
loggers, the Trainer), the LightningModule (`module`), what it records (`recorder`), how it
stops (`stops`, `guards`), the map callback, and one adapter per logger (`loggers`)."""
