from __future__ import annotations

from torch import Tensor, nn

from attnexp.attention.base import Attention
from attnexp.attention.kernels import ScoreBias, attend
from attnexp.attention.registry import register


@register
class MultiHead(Attention):
    """Standard multi-head attention in the BERT/GPT layout: one QKV projection, heads split by
    reshape/transpose, additive mask, dropout on the attention probabilities, optional head mask,
    output projection. `attention=causal` and `attention=bidirectional` select it.

    It is also the base of the variants that change one thing about it: the key/value head count
    (`kv_heads` — gqa), the positions of q and k (`rotate` — rotary), an additive score bias
    (`score_bias` — alibi, forgetting), the kernel itself (`kernel` — linear, sigmoid, softpick,
    sink, differential), the projections (`project` — mla) or what follows the heads (`finish` —
    gated, differential). Every one returns the weights it multiplied V with.
    """

    name = "mha"
    aliases = ("fused",)  # its name before attnexp 0.2: checkpoints and configs that say "fused" still load
    summary = "multi-head attention, one QKV projection (BERT/GPT layout), optional head mask"
    packed_qkv = True

    def __init__(self, d_model, n_heads, cfg):
        super().__init__(d_model, n_heads, cfg)
        self.d_head = d_model // n_heads
        self.n_kv = self.kv_heads()
        self.qkv = nn.Linear(d_model, (n_heads + 2 * self.n_kv) * self.d_head)
        self.out = nn.Linear(d_model, d_model)

    def qkv_weight(self):
        return self.qkv.weight

    def kv_heads(self) -> int:
        return self.n_heads

    def rotate(self, q_BHTD, k_BGTD):
        return q_BHTD, k_BGTD

    def score_bias(self, x_BTD: Tensor, mask) -> ScoreBias | None:
        return None

    def kernel(self, q, k, v, mask, need_weights, bias: ScoreBias | None):
        return attend(q, k, v, mask, backend=self.backend, bias=bias, dropout_p=self.cfg.dropout,
                      training=self.training, need_weights=need_weights)

    def project(self, x_BTD: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """q (B, H, T, Dq), k (B, G, T, Dq), v (B, G, T, Dv) from the layer input."""
        B, T, _ = x_BTD.shape
        H, G, Dh = self.n_heads, self.n_kv, self.d_head
        q, k, v = self.qkv(x_BTD).split([H * Dh, G * Dh, G * Dh], dim=-1)
        q_BHTD = q.view(B, T, H, Dh).transpose(1, 2)
        k_BGTD, v_BGTD = (t.view(B, T, G, Dh).transpose(1, 2) for t in (k, v))
        return q_BHTD, k_BGTD, v_BGTD

    def finish(self, out_BHTD: Tensor, x_BTD: Tensor) -> Tensor:
        """Heads' outputs (weights @ V) -> the layer's output (B, T, D)."""
        B, T, _ = x_BTD.shape
        return self.out(out_BHTD.transpose(1, 2).reshape(B, T, -1))

    def forward(self, x_BTD, mask, need_weights=False, head_mask_H: Tensor | None = None):
        q_BHTD, k_BGTD, v_BGTD = self.project(x_BTD)
        q_BHTD, k_BGTD = self.rotate(q_BHTD, k_BGTD)
        out_BHTD, w_BHTT = self.kernel(q_BHTD, k_BGTD, v_BGTD, mask, need_weights, self.score_bias(x_BTD, mask))
        if head_mask_H is not None:  # (p * m_h) @ v == m_h * (p @ v): works on every backend
            m = head_mask_H.to(out_BHTD.dtype)[None, :, None, None]
            out_BHTD = out_BHTD * m
            w_BHTT = None if w_BHTT is None else w_BHTT * m
        return self.finish(out_BHTD, x_BTD), w_BHTT
