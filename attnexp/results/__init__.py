"""What runs leave and how they are read: summary.json (`summary`: its statuses, one writer, one
reader), runs side by side (`compare`), the HTML report (`report`) and the block a run ends with
(`ending`). No torch."""
