"""The variants of 2024-25, each against the property its paper gives it: the special case where it
reduces to plain softmax attention, or a consequence of its equations. Each is also held to the
authors' own released code in test_reference_implementations.py."""

from __future__ import annotations

import math

import pytest
import torch

from attnexp.attention.variants.softpick import softpick
from attnexp.config import AttentionConfig, ModelConfig
from attnexp.model import Transformer
from helpers.variants import B, D, H, T, build, pad_valid, spec

MASKS = ["causal", "bidirectional"]
close = dict(atol=2e-5, rtol=1e-4)
Dh = D // H


def call(mod, x, mask, valid=None, need_weights=False):
    with torch.no_grad():
        return mod(x, spec(mod, mask, valid), need_weights=need_weights)


def naive_softmax_attention(q_BHTE, k_BHTE, v_BHTD, allowed):
    s = q_BHTE @ k_BHTE.transpose(-2, -1) / math.sqrt(q_BHTE.shape[-1])
    return torch.softmax(s.masked_fill(~allowed, float("-inf")), -1) @ v_BHTD


def heads(t_BTX):
    return t_BTX.view(t_BTX.shape[0], t_BTX.shape[1], H, -1).transpose(1, 2)


def copy_fused(src, dst):
    dst.qkv.load_state_dict(src.qkv.state_dict())
    dst.out.load_state_dict(src.out.state_dict())


@pytest.mark.parametrize("mask", MASKS)
def test_differential_with_lambda_zero_is_softmax_on_the_first_maps_projections(mask):
    mod = build("differential", "eager", mask)
    for p in (mod.lambda_q1, mod.lambda_k1, mod.lambda_q2, mod.lambda_k2):
        p.data.zero_()  # exp(0) - exp(0) = 0
    mod.lambda_init = 0.0
    assert float(mod.lam().detach()) == 0.0
    x, valid = torch.randn(B, T, D), pad_valid()
    y, w = call(mod, x, mask, valid, need_weights=True)
    with torch.no_grad():
        q, k, v = (heads(t) for t in mod.qkv(x).split(D, -1))
        ref = naive_softmax_attention(q[..., : Dh // 2], k[..., : Dh // 2], v, spec(mod, mask, valid).allowed(T, x.device))
        y_ref = mod.out(mod.head_norm(ref).transpose(1, 2).reshape(B, T, D))
    torch.testing.assert_close(y[valid], y_ref[valid], **close)
    assert (w >= 0).all()  # with lambda = 0 the map is the first softmax alone


def test_differential_maps_are_signed_rows_sum_to_one_minus_lambda_and_lambda_init_follows_depth():
    mod = build("differential", "eager", "causal")
    y, w = call(mod, torch.randn(B, T, D), "causal", need_weights=True)
    lam = float(mod.lam().detach())
    torch.testing.assert_close(w.sum(-1), torch.full((B, H, T), 1 - lam), atol=1e-5, rtol=0)
    model = Transformer(ModelConfig(d_model=D, n_heads=H, n_layers=3), AttentionConfig(name="differential"), 20)
    inits = [b.attn.lambda_init for b in model.blocks]
    assert inits == pytest.approx([0.8 - 0.6 * math.exp(-0.3 * i) for i in range(3)])  # the paper's, l = i + 1


@pytest.mark.parametrize("backend", ["eager", "sdpa", "flex"])
@pytest.mark.parametrize("mask", MASKS)
def test_gated_with_the_gate_open_is_the_ungated_layer(backend, mask):
    gated, fused = build("gated", backend, mask), build("mha", "eager", mask)
    copy_fused(fused, gated)
    gated.gate.weight.data.zero_()
    gated.gate.bias.data.fill_(100.0)  # sigmoid(100) == 1 in float32
    x, valid = torch.randn(B, T, D), pad_valid()
    torch.testing.assert_close(call(gated, x, mask, valid)[0][valid], call(fused, x, mask, valid)[0][valid], **close)
    gated.gate.bias.data.fill_(0.0)  # and a real gate changes it
    assert not torch.allclose(call(gated, x, mask, valid)[0][valid], call(fused, x, mask, valid)[0][valid])


@pytest.mark.parametrize("mask", MASKS)
def test_sigmoid_weights_are_sigmoid_of_score_plus_its_constant_bias(mask):
    mod = build("sigmoid", "eager", mask)
    x, valid = torch.randn(B, T, D), pad_valid()
    _, w = call(mod, x, mask, valid, need_weights=True)
    with torch.no_grad():
        q, k, _ = (heads(t) for t in mod.qkv(x).split(D, -1))
    allowed = spec(mod, mask, valid).allowed(T, x.device)
    expected = torch.sigmoid(q @ k.transpose(-2, -1) / math.sqrt(Dh) + mod.cfg.sigmoid_bias) * allowed
    torch.testing.assert_close(w, expected, atol=1e-6, rtol=1e-5)


def test_softpick_matches_its_formula_and_never_gives_nan():
    x = torch.randn(5, 9) * 2
    allowed = torch.rand(5, 9) > 0.3
    allowed[:, 0] = True
    got = softpick(x, allowed, 1e-6)
    e = (torch.exp(x) - 1) * allowed
    torch.testing.assert_close(got, torch.relu(e) / (e.abs().sum(-1, keepdim=True) + 1e-6), atol=1e-6, rtol=1e-5)
    assert (got.sum(-1) <= 1 + 1e-6).all() and (got[x <= 0] == 0).all()
    big = softpick(torch.tensor([[200.0, 199.0, -3.0]]), torch.ones(1, 3, dtype=torch.bool), 1e-6)  # e^200 overflows float32
    assert torch.isfinite(big).all() and float(big.sum()) == pytest.approx(1.0, abs=1e-3)
    none = torch.zeros(2, 4, dtype=torch.bool)  # a row with no allowed key: zeros, and a finite gradient
    xs = torch.randn(2, 4, requires_grad=True)
    out = softpick(xs, none, 1e-6)
    out.sum().backward()
    assert (out == 0).all() and torch.isfinite(xs.grad).all()


@pytest.mark.parametrize("backend", ["eager", "sdpa", "flex"])
@pytest.mark.parametrize("mask", MASKS)
def test_sink_at_minus_infinity_is_plain_softmax_and_its_mass_is_the_rest(backend, mask):
    sink, fused = build("sink", backend, mask), build("mha", "eager", mask)
    copy_fused(fused, sink)
    sink.sink_H.data.fill_(float("-inf"))
    x, valid = torch.randn(B, T, D), pad_valid()
    torch.testing.assert_close(call(sink, x, mask, valid)[0][valid], call(fused, x, mask, valid)[0][valid], **close)
    sink.sink_H.data = torch.tensor([-1.0, 0.0, 1.0, 2.0])
    _, w = call(sink, x, mask, valid, need_weights=True)
    with torch.no_grad():
        q, k, _ = (heads(t) for t in sink.qkv(x).split(D, -1))
        s = (q @ k.transpose(-2, -1) / math.sqrt(Dh)).masked_fill(~spec(sink, mask, valid).allowed(T, x.device), float("-inf"))
        denom = torch.exp(s).sum(-1) + torch.exp(sink.sink_H)[None, :, None]
    torch.testing.assert_close(1 - w.sum(-1), torch.exp(sink.sink_H)[None, :, None] / denom, atol=1e-5, rtol=1e-4)


def test_mla_keys_and_values_live_in_the_latent():
    mod = build("mla", "eager", "causal", kv_rank=6)
    x = torch.randn(1, 40, D)
    with torch.no_grad():
        _, k, v = mod.project(x)
    keys = k[0, ..., :Dh].transpose(0, 1).reshape(40, -1)  # content keys of all heads, one row a position
    assert torch.linalg.matrix_rank(keys) == 6 and torch.linalg.matrix_rank(v[0].transpose(0, 1).reshape(40, -1)) == 6


@pytest.mark.parametrize("backend", ["eager", "sdpa", "flex"])
@pytest.mark.parametrize("mask", MASKS)
def test_forgetting_with_the_gate_at_one_is_plain_softmax(backend, mask):
    fox, fused = build("forgetting", backend, mask), build("mha", "eager", mask)
    copy_fused(fused, fox)
    fox.forget.weight.data.zero_()
    fox.forget.bias.data.fill_(100.0)  # f = sigmoid(100) = 1: nothing forgotten
    x, valid = torch.randn(B, T, D), pad_valid()
    torch.testing.assert_close(call(fox, x, mask, valid)[0][valid], call(fused, x, mask, valid)[0][valid], **close)


def test_forgetting_bias_is_the_sum_of_log_forget_gates_between_key_and_query():
    fox = build("forgetting", "eager", "causal")
    x = torch.randn(1, 6, D)
    with torch.no_grad():
        log_f = torch.nn.functional.logsigmoid(fox.forget(x))[0]  # (T, H)
        bias = fox.score_bias(x, spec(fox, "causal")).dense(6)[0]  # (H, T, T)
    for h in range(H):
        for i in range(6):
            for j in range(i + 1):
                assert abs(float(bias[h, i, j]) - float(log_f[j + 1: i + 1, h].sum())) < 1e-5
    assert (bias <= 0).all()


@pytest.mark.parametrize("backend", ["eager", "sdpa", "flex"])
@pytest.mark.parametrize("mask", MASKS)
def test_smeared_keys_are_the_papers_mix_of_each_key_and_the_one_before(backend, mask):
    """Olsson et al.'s k'_j = sigmoid(a) k_j + (1 - sigmoid(a)) k_{j-1}, k'_0 = k_0 (no released
    code: the paper's equation): with a = +inf it is plain MHA; with a learned a per head, the maps
    are softmax(q k'^T / sqrt(d)) with the keys mixed so."""
    smeared, fused = build("smeared", backend, mask), build("mha", "eager", mask)
    copy_fused(fused, smeared)
    x, valid = torch.randn(B, T, D), pad_valid()
    smeared.smear.data.fill_(100.0)  # each key its own: no smearing
    torch.testing.assert_close(call(smeared, x, mask, valid)[0][valid], call(fused, x, mask, valid)[0][valid], **close)
    smeared.smear.data = torch.tensor([-2.0, -0.5, 0.5, 2.0])
    _, w = call(build_like(smeared, "eager"), x, mask, valid, need_weights=True)
    with torch.no_grad():
        q, k, _ = (heads(t) for t in smeared.qkv(x).split(D, -1))
        own = torch.sigmoid(smeared.smear)[None, :, None, None]
        k = own * k + (1 - own) * torch.cat([k[:, :, :1], k[:, :, :-1]], 2)
        allowed = spec(smeared, mask, valid).allowed(T, x.device)
        expected = torch.softmax((q @ k.transpose(-2, -1) / math.sqrt(Dh)).masked_fill(~allowed, float("-inf")), -1)
    real = valid[:, None, :, None] & valid[:, None, None, :]
    torch.testing.assert_close(w[real.expand_as(w)], expected[real.expand_as(w)], atol=1e-5, rtol=1e-4)


def build_like(mod, backend):
    """The same module (parameters shared) on another backend, for its weights."""
    import copy

    other = copy.deepcopy(mod)
    other.backend = backend
    return other
