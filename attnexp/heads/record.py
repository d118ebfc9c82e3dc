"""One analysis of the heads (heads.analysis.read_heads fills it; maps.snapshot saves and reads it;
the viewer, the callback, `attnexp maps` and the notebook take it whole): torch-free, so a reader of
snapshots (the report) loads no torch."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from attnexp.heads import importance


@dataclass
class Analysis:
    # (L, H) each, by name: every declared per-head quantity (heads.quantities), the maps' statistics and
    # the analysed scores (patterns, induction pair, importance) alike; heads.analysis.read_heads fills it
    scores: dict[str, np.ndarray] = field(default_factory=dict)
    roles: np.ndarray | None = None  # (L, H) role names (roles.ROLES, or "mixed")
    layer_importance: np.ndarray | None = None  # (L,): the loss change with every head of a layer silenced
    rollout: list[np.ndarray] | None = None  # per example (n, n): output position <- input token, all layers
    flow: list[np.ndarray] | None = None  # per example (n, n), as rollout
    relevance: list[dict] | None = None  # per example: pred / true class and each token's relevance to each
    skipped: dict[str, str] = field(default_factory=dict)  # method -> why it was not computed
    notes: dict[str, str] = field(default_factory=dict)  # method -> what it did with maps that are not distributions

    @property
    def heads_90(self) -> int | None:
        """How many heads carry 90% of the total importance (None without importance)."""
        imp = self.scores.get("importance")
        return None if imp is None else importance.heads_for_share(imp)

    def scalars(self) -> dict[str, float]:
        """Run-level scalars beside the per-head ones (`quantities.flat`)."""
        out = {}
        if self.heads_90 is not None:
            out["attn/heads_90"] = float(self.heads_90)
        if self.layer_importance is not None:
            out.update({f"attn/L{i}/layer_importance": float(v) for i, v in enumerate(self.layer_importance)})
        if "induction" in self.scores:
            out["attn/induction_best"] = float(self.scores["induction"].max())
        return out
