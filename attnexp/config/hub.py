"""Whether Hugging Face downloads are switched off (one check for the 20 Newsgroups loader and the
pretrained-model import)."""

from __future__ import annotations

import os


def hub_offline(library_flag: str) -> bool:
    """HF_HUB_OFFLINE, or the library's own flag (HF_DATASETS_OFFLINE, TRANSFORMERS_OFFLINE)."""
    return any(os.environ.get(v, "0") not in ("0", "", "false") for v in ("HF_HUB_OFFLINE", library_flag))
