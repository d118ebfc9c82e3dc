"""Attention variants behind one interface, a registry from name to class, and the shared kernels.

Every variant has the same call, `forward(x_BTD, mask: MaskSpec, need_weights=False) ->
(y_BTD, weights_BHTT | None)`, and class attributes that say what it supports. A new variant is
one file under `attnexp/attention/variants/` that registers its class with `@register`; the
property tests in tests/unit/attention/test_registry_properties.py cover it at once.
"""

from attnexp.attention.base import Attention
from attnexp.attention.masking import MaskSpec
from attnexp.attention.registry import build, canonical, get, matrix, register, registered, validate, with_defaults

__all__ = ["Attention", "MaskSpec", "register", "canonical", "get", "build", "validate", "registered", "with_defaults", "matrix"]
