"""The fingerprint 🤗 datasets keeps of a Dataset's contents and the transforms that made it
(Dataset._fingerprint): what keys attnexp's tokenizer cache to the training posts.
tests/unit/test_private_apis.py holds it to the installed datasets."""

from __future__ import annotations


def fingerprint(dataset) -> str:
    return dataset._fingerprint
