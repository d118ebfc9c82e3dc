"""One module per attention variant; each registers itself (attnexp.attention.registry)."""
