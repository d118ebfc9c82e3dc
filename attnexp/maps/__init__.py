"""Attention maps: computed from the current weights on a fixed probe set, rendered, scored,
logged to the dashboard and saved in the run dir (maps/)."""
