"""Each 2024-25 variant against a transcription of the code its authors released (tests/references/,
each module citing repository, file and commit), with the same weights mapped across, in float64:
outputs and the gradients of the input and of every weight both sides use agree to ~1e-12.

Where attnexp deliberately differs, the test says how and checks at the point where the two must
agree: positions come from attnexp's embeddings, not from RoPE inside the differential and gated
layers (their RoPE is run with zero angles); attnexp's fused layers carry bias terms the authors'
layers lack (set to zero here); a bidirectional mask is attnexp's extension where the authors'
code is causal only."""

from __future__ import annotations

import math

import pytest
import torch

from attnexp.attention import MaskSpec
from helpers.references import (
    deepseek_mla,
    diff_transformer,
    flash_sigmoid,
    forgetting_transformer,
    gated_attention,
    gpt_oss,
    softpick,
)
from helpers.variants import MODEL, D, H, build

B, T = 2, 12
Dh = D // H
exact = dict(atol=1e-12, rtol=1e-10)


def lengths_mask(lengths) -> torch.Tensor:
    return torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]


def assert_same_function(ours, theirs, x, mod, valid=None):
    """ours(x), theirs(x) -> equal outputs (at `valid` positions) and equal gradients of x and of
    each of the layer's parameters that `theirs` reads (it maps them into the authors' layout with
    differentiable slices, so gradients reach the same leaves)."""
    x = x.clone().requires_grad_(True)
    keep = torch.ones(x.shape[:2], dtype=torch.bool) if valid is None else valid
    y_ours, y_ref = ours(x)[keep], theirs(x)[keep]
    torch.testing.assert_close(y_ours, y_ref, **exact)
    g = torch.randn_like(y_ours)
    params = dict(mod.named_parameters())
    names = ["input", *params]
    tensors = [x, *params.values()]
    grads_ours = torch.autograd.grad(y_ours, tensors, g, allow_unused=True)
    grads_ref = torch.autograd.grad(y_ref, tensors, g, allow_unused=True)
    used = 0
    for name, a, b in zip(names, grads_ours, grads_ref):
        if b is None:
            continue  # a weight the authors' layer does not have (a bias attnexp adds, held at zero)
        used += 1
        torch.testing.assert_close(a, b, **exact, msg=f"gradient of {name}")
    assert used >= 2


def layer(name, mask="causal", **kw):
    mod = build(name, "eager", mask, **kw).double()
    return mod


def zero_biases(mod, *linears):
    with torch.no_grad():
        for lin in linears:
            lin.bias.zero_()


def per_head(*weights_HxX):
    """Rows interleaved head by head: [w1 of head 0; w2 of head 0; w1 of head 1; ...]."""
    return torch.cat([w.view(H, -1, *w.shape[1:]) for w in weights_HxX], 1).flatten(0, 1)


# -- Differential Transformer: microsoft/unilm ------------------------------------------------------

@pytest.mark.parametrize("mask", ["causal", "bidirectional"])
@pytest.mark.parametrize("depth", [0, 2])
def test_differential_equals_unilm_multihead_diffattn(mask, depth):
    mod = layer("differential", mask)
    mod.set_layer(depth)
    zero_biases(mod, mod.qkv, mod.out)  # theirs: q/k/v/out_proj without bias

    def weights():
        qkv = mod.qkv.weight
        return {"q_proj": qkv[:D], "k_proj": qkv[D:2 * D], "v_proj": qkv[2 * D:], "out_proj": mod.out.weight,
                "lambda_q1": mod.lambda_q1, "lambda_k1": mod.lambda_k1, "lambda_q2": mod.lambda_q2,
                "lambda_k2": mod.lambda_k2, "subln": mod.head_norm.weight}

    # attnexp has no RoPE inside the layer (positions come from the model's embeddings): their
    # rotary embedding at zero angle is the identity, where the two must agree.
    half = Dh // 2
    rel_pos = (torch.ones(T, half // 2, dtype=torch.float64), torch.zeros(T, half // 2, dtype=torch.float64))
    attn_mask = None if mask == "causal" else torch.zeros(T, T, dtype=torch.float64)  # theirs: None means causal
    x = torch.randn(B, T, D, dtype=torch.float64)
    assert_same_function(lambda x: mod(x, MaskSpec(mask == "causal"))[0],
                         lambda x: diff_transformer.multihead_diffattn(x, weights(), H, depth, rel_pos, attn_mask), x, mod)
    assert mod.lambda_init == pytest.approx(diff_transformer.lambda_init_fn(depth))


# -- Gated attention: qiuzh20/gated_attention ---------------------------------------------------------

@pytest.mark.parametrize("mask", ["causal", "bidirectional"])
def test_gated_equals_qwen3_elementwise_output_gate(mask):
    mod = layer("gated", mask)

    def weights():  # theirs: one q_proj whose rows are [queries; gates] per key/value group (one head each here)
        qkv_w, qkv_b = mod.qkv.weight, mod.qkv.bias
        return {"q_proj": (per_head(qkv_w[:D], mod.gate.weight), per_head(qkv_b[:D, None], mod.gate.bias[:, None])[:, 0]),
                "k_proj": (qkv_w[D:2 * D], qkv_b[D:2 * D]), "v_proj": (qkv_w[2 * D:], qkv_b[2 * D:]),
                "o_proj": (mod.out.weight, mod.out.bias)}

    cos_sin = (torch.ones(B, T, Dh, dtype=torch.float64), torch.zeros(B, T, Dh, dtype=torch.float64))  # RoPE at angle 0
    valid = lengths_mask([T, 7])
    allowed = MaskSpec(mask == "causal", valid).allowed(T, torch.device("cpu"))
    additive = torch.zeros(B, 1, T, T, dtype=torch.float64).masked_fill(~allowed, float("-inf"))
    x = torch.randn(B, T, D, dtype=torch.float64)
    assert_same_function(lambda x: mod(x, MaskSpec(mask == "causal", valid))[0],
                         lambda x: gated_attention.qwen3_gated_attention(x, weights(), H, cos_sin, additive), x, mod, valid)


# -- Sigmoid attention: apple/ml-sigmoid-attention ------------------------------------------------------

@pytest.mark.parametrize("mask", ["causal", "bidirectional"])
def test_sigmoid_equals_flash_sigmoid_attention_ref_with_a_constant_bias(mask):
    mod = layer("sigmoid", mask)
    assert mod.cfg.sigmoid_bias == pytest.approx(-math.log(MODEL.max_len))
    valid = lengths_mask([T, 7])

    def theirs(x):
        q, k, v = (t.transpose(1, 2) for t in mod.project(x))  # (B, T, H, Dh), the same projections
        o, _ = flash_sigmoid.attention_ref(q, k, v, valid, valid, causal=mask == "causal", upcast=False,
                                           sigmoid_bias=mod.cfg.sigmoid_bias)
        return mod.finish(o.transpose(1, 2), x)

    x = torch.randn(B, T, D, dtype=torch.float64)
    assert_same_function(lambda x: mod(x, MaskSpec(mask == "causal", valid))[0], theirs, x, mod, valid)
    with torch.no_grad():
        q, k, v = (t.transpose(1, 2) for t in mod.project(x))
        _, w_ref = flash_sigmoid.attention_ref(q, k, v, valid, valid, causal=mask == "causal", upcast=False,
                                               sigmoid_bias=mod.cfg.sigmoid_bias)
        w = mod(x, MaskSpec(mask == "causal", valid), need_weights=True)[1]
    torch.testing.assert_close(w.transpose(1, 2)[valid], w_ref.transpose(1, 2)[valid], **exact)  # rows of real queries


def test_sigmoid_bias_defaults_to_the_authors_constant_for_their_context_length():
    from attnexp import attention
    from attnexp.config import AttentionConfig, ModelConfig

    a = attention.validate(AttentionConfig(name="sigmoid", backend="eager"), ModelConfig(max_len=flash_sigmoid.MAX_SEQ_LEN))
    assert a.sigmoid_bias == pytest.approx(flash_sigmoid.SIGMOID_BIAS_AT_2048, abs=0.01)  # -ln 2048 = -7.6246
    a = attention.validate(AttentionConfig(name="sigmoid", backend="eager", sigmoid_bias=-3.0), ModelConfig())
    assert a.sigmoid_bias == -3.0


# -- Softpick: zaydzuhri/softpick-attention -------------------------------------------------------------

@pytest.mark.parametrize("eps", [1e-8, 1e-6])
def test_softpick_equals_the_authors_naive_softpick_attn(eps):
    mod = layer("softpick", "causal", eps=eps)
    x = torch.randn(B, T, D, dtype=torch.float64) * 2  # large enough that some rows have every score below 0

    def theirs(x):
        q, k, v = mod.project(x)
        o, _ = softpick.naive_softpick_attn(q, k, v, eps=eps)
        return mod.finish(o, x)

    assert_same_function(lambda x: mod(x, MaskSpec(True))[0], theirs, x, mod)
    with torch.no_grad():
        _, w_ref = softpick.naive_softpick_attn(*mod.project(x), eps=eps)
        w = mod(x, MaskSpec(True), need_weights=True)[1]
    torch.testing.assert_close(w, w_ref, **exact)


# -- Attention sinks: openai/gpt-oss -----------------------------------------------------------------

@pytest.mark.parametrize("backend", ["eager", "sdpa", "flex"])
def test_sink_equals_gpt_oss_sdpa(backend):
    mod = build("sink", backend, "causal").double()
    with torch.no_grad():
        mod.sink_H.copy_(torch.tensor([-1.0, 0.0, 0.5, 2.0]))

    def theirs(x):
        q, k, v = (t.transpose(1, 2) for t in mod.project(x))  # (B, T, H, Dh)
        out = torch.stack([gpt_oss.sdpa(q[b][:, :, None], k[b], v[b], mod.sink_H, 1 / math.sqrt(Dh)) for b in range(B)])
        return mod.finish(out.view(B, T, H, Dh).transpose(1, 2), x)

    x = torch.randn(B, T, D, dtype=torch.float64)
    ours = lambda x: mod(x, MaskSpec(True))[0]  # noqa: E731
    if backend == "flex":  # FlexAttention has no backward on the CPU: outputs only
        with torch.no_grad():
            torch.testing.assert_close(ours(x), theirs(x), **exact)
        return
    assert_same_function(ours, theirs, x, mod)


# -- Multi-head latent attention: deepseek-ai/DeepSeek-V3 -----------------------------------------------

R, KV_RANK = 4, 6


def deepseek_weights(mod, q_rank):
    """attnexp's MLA weights in DeepSeek's layout. Their RoPE pairs channels (2i, 2i+1), attnexp's
    (i, i + R/2): the rope rows are permuted so both compute the same dot products."""
    perm = torch.stack([torch.arange(R // 2), torch.arange(R // 2) + R // 2], 1).flatten()
    q_rope = mod.q_rope.weight.view(H, R, -1)[:, perm].reshape(H * R, -1)
    wq = per_head(mod.q_up.weight, q_rope)
    p = {"wkv_a": torch.cat([mod.kv_down.weight, mod.k_rope.weight[perm]]), "kv_norm": mod.kv_norm.weight,
         "wkv_b": per_head(mod.k_up.weight, mod.v_up.weight), "wo": mod.out.weight}
    if q_rank:
        p.update(wq_a=mod.q_down.weight, q_norm=mod.q_norm.weight, wq_b=wq)
    else:
        p["wq"] = wq
    return p


@pytest.mark.parametrize("q_rank", [0, 8])
@pytest.mark.parametrize("mask", ["causal", "bidirectional"])
def test_mla_equals_deepseek_v3_mla_with_its_latent_norms(q_rank, mask):
    mod = layer("mla", mask, kv_rank=KV_RANK, q_rank=q_rank, rope_dim=R)
    with torch.no_grad():  # the norms' scales away from 1, so a missing norm would show
        mod.kv_norm.weight.copy_(torch.rand(KV_RANK) + 0.5)
        if q_rank:
            mod.q_norm.weight.copy_(torch.rand(q_rank) + 0.5)
    freqs_cis = deepseek_mla.precompute_freqs_cis(R, T, mod.cfg.rope_base)
    additive = torch.full((T, T), float("-inf"), dtype=torch.float64).triu_(1) if mask == "causal" else None
    x = torch.randn(B, T, D, dtype=torch.float64)
    assert_same_function(lambda x: mod(x, MaskSpec(mask == "causal"))[0],
                         lambda x: deepseek_mla.mla(x, deepseek_weights(mod, q_rank), H, q_rank, KV_RANK, Dh, R, Dh, freqs_cis,
                                                    additive), x, mod)


# -- Forgetting Transformer: zhixuan-lin/forgetting-transformer ------------------------------------------

@pytest.mark.parametrize("backend", ["eager", "sdpa", "flex"])
def test_forgetting_equals_the_authors_forgetting_attention_layer(backend):
    mod = build("forgetting", backend, "causal").double()
    zero_biases(mod, mod.qkv, mod.out)  # theirs: q/k/v/o_proj without bias; the forget gate has one

    def theirs(x):
        qkv = mod.qkv.weight
        p = {"q_proj": qkv[:D], "k_proj": qkv[D:2 * D], "v_proj": qkv[2 * D:], "o_proj": mod.out.weight,
             "fgate_proj": mod.forget.weight, "fgate_bias": mod.forget.bias}
        return forgetting_transformer.forgetting_attention_layer(x, p, H)

    x = torch.randn(B, T, D, dtype=torch.float64)
    ours = lambda x: mod(x, MaskSpec(True))[0]  # noqa: E731
    if backend == "flex":
        with torch.no_grad():
            torch.testing.assert_close(ours(x), theirs(x), **exact)
        return
    assert_same_function(ours, theirs, x, mod)


def test_forget_gate_starts_where_the_authors_start_it():
    """fgate_proj: weight N(0, 0.02^2), bias 0 (their _initialize_weights), so f starts at 0.5;
    attention.forget_bias_init moves the start."""
    from attnexp.config import AttentionConfig, ModelConfig
    from attnexp.model import Transformer

    torch.manual_seed(0)
    model = Transformer(ModelConfig(d_model=64, n_heads=4, n_layers=2), AttentionConfig(name="forgetting"), 30)
    gate = model.blocks[1].attn.forget
    assert gate.bias.abs().max() == 0 and 0.015 < float(gate.weight.std()) < 0.025
    a = AttentionConfig(name="forgetting", forget_bias_init=3.0)
    model = Transformer(ModelConfig(d_model=64, n_heads=4, n_layers=2), a, 30)
    assert torch.all(model.blocks[0].attn.forget.bias == 3.0)
