"""Which keys each query may see: causal or not, key padding, an optional sliding window.

One `MaskSpec` is built per model forward and shared by every layer, so the dense mask and the
FlexAttention block mask are each built once per forward, not once per layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor


@dataclass(eq=False)
class MaskSpec:
    causal: bool
    key_valid_BT: Tensor | None = None  # True at real tokens, False at padding
    window: int | None = None  # keys within `window` positions of the query (incl. itself)
    _cache: dict = field(default_factory=dict, repr=False)

    def allowed(self, T: int, device: torch.device, include_self: bool = True) -> Tensor:
        """Boolean (B|1, 1, T, T): True where query i may attend to key j.

        `include_self` lets every query see itself even when it is padding, so no softmax row is
        all -inf (a NaN that would reach real tokens' gradients). Outputs at padding are ignored.
        """
        key = ("dense", T, str(device), include_self)
        if key not in self._cache:
            i = torch.arange(T, device=device)[:, None]
            j = torch.arange(T, device=device)[None, :]
            ok = torch.ones(T, T, dtype=torch.bool, device=device)
            if self.causal:
                ok &= j <= i
            if self.window is not None:
                ok &= (i - j).abs() < self.window
            ok = ok[None, None]
            if self.key_valid_BT is not None:
                ok = ok & self.key_valid_BT[:, None, None, :].to(device)
            if include_self:
                ok = ok | torch.eye(T, dtype=torch.bool, device=device)
            self._cache[key] = ok
        return self._cache[key]

    @property
    def is_plain_causal(self) -> bool:
        """Lets SDPA take `is_causal=True` (flash path) instead of a dense mask."""
        return self.causal and self.key_valid_BT is None and self.window is None

    @property
    def is_full(self) -> bool:
        return not self.causal and self.key_valid_BT is None and self.window is None

    def mask_mod(self):
        causal, window, valid = self.causal, self.window, self.key_valid_BT

        def mod(b, h, q_idx, kv_idx):
            ok = q_idx == q_idx  # all-True tensor of the right shape
            if causal:
                ok = ok & (kv_idx <= q_idx)
            if window is not None:
                ok = ok & ((q_idx - kv_idx).abs() < window)
            if valid is not None:
                ok = ok & valid[b, kv_idx]
            return ok | (q_idx == kv_idx)

        return mod

    def block_mask(self, T: int, device: torch.device):
        from torch.nn.attention.flex_attention import create_block_mask

        key = ("block", T, str(device))
        if key not in self._cache:
            B = None if self.key_valid_BT is None else self.key_valid_BT.shape[0]
            self._cache[key] = create_block_mask(self.mask_mod(), B, None, T, T, device=device)
        return self._cache[key]
