"""Different implementations of the same function agree when given the same weights."""

from __future__ import annotations

import pytest
import torch

from attnexp import attention
from attnexp.attention.variants.alibi import alibi_slopes
from attnexp.config import AttentionConfig, ModelConfig
from attnexp.model import Transformer
from helpers.variants import EXTRA, B, D, H, T, build, pad_valid, spec

MASKS = ["causal", "bidirectional"]
close = dict(atol=1e-5, rtol=1e-5)


def copy_heads_into_fused(heads_mod, fused):
    """multi_head_list's per-head Q/K/V -> one fused QKV matrix [Q_1..Q_h; K_1..K_h; V_1..V_h]."""
    with torch.no_grad():
        for i, part in enumerate("qkv"):
            w = torch.cat([getattr(h, part).weight for h in heads_mod.heads])
            b = torch.cat([getattr(h, part).bias for h in heads_mod.heads])
            fused.qkv.weight[i * D:(i + 1) * D] = w
            fused.qkv.bias[i * D:(i + 1) * D] = b
        fused.out.load_state_dict(heads_mod.out.state_dict())


@pytest.mark.parametrize("mask", MASKS)
def test_list_of_heads_equals_fused_equals_torch_mha(mask):
    heads, fused = build("multi_head_list", mask=mask), build("mha", mask=mask, seed=1)
    mha = build("torch_mha", mask=mask, seed=2)
    copy_heads_into_fused(heads, fused)
    with torch.no_grad():
        mha.mha.in_proj_weight.copy_(fused.qkv.weight)
        mha.mha.in_proj_bias.copy_(fused.qkv.bias)
        mha.mha.out_proj.load_state_dict(fused.out.state_dict())
    x, valid = torch.randn(B, T, D), pad_valid()
    outs = [m(x, spec(m, mask, valid), need_weights=True) for m in (heads, fused, mha)]
    for y, w in outs[1:]:
        torch.testing.assert_close(y[valid], outs[0][0][valid], **close)
        torch.testing.assert_close(w, outs[0][1], **close)


@pytest.mark.parametrize("mask", MASKS)
def test_single_head_equals_fused_with_one_head(mask):
    single = build("single_head", mask=mask)
    fused = FusedOneHead(mask)
    with torch.no_grad():
        fused.qkv.weight.copy_(torch.cat([single.head.q.weight, single.head.k.weight, single.head.v.weight]))
        fused.qkv.bias.copy_(torch.cat([single.head.q.bias, single.head.k.bias, single.head.v.bias]))
        fused.out.weight.copy_(torch.eye(D))  # single_head has no output projection
        fused.out.bias.zero_()
    x, valid = torch.randn(B, T, D), pad_valid()
    (y1, w1), (y2, w2) = (m(x, spec(m, mask, valid), need_weights=True) for m in (single, fused))
    torch.testing.assert_close(y2[valid], y1[valid], **close)
    torch.testing.assert_close(w2, w1, **close)


def FusedOneHead(mask):
    from attnexp.attention.variants.mha import MultiHead

    return MultiHead(D, 1, AttentionConfig(name="mha", mask=mask, backend="eager")).eval()


@pytest.mark.parametrize("backend", ["eager", "sdpa"])
@pytest.mark.parametrize("mask", MASKS)
def test_sliding_window_covering_the_sequence_is_full_attention(backend, mask):
    full = build("mha", backend, mask)
    local = build("sliding_window", backend, mask, seed=5, window=T)
    local.load_state_dict(full.state_dict())
    x, valid = torch.randn(B, T, D), pad_valid()
    torch.testing.assert_close(local(x, spec(local, mask, valid))[0][valid], full(x, spec(full, mask, valid))[0][valid], **close)
    narrow = build("sliding_window", backend, mask, seed=5, window=3)
    narrow.load_state_dict(full.state_dict())
    assert not torch.allclose(narrow(x, spec(narrow, mask, valid))[0], full(x, spec(full, mask, valid))[0])


@pytest.mark.parametrize("backend", ["eager", "sdpa"])
def test_alibi_with_zero_slopes_is_plain_softmax_attention(backend):
    plain, alibi = build("mha", backend), build("alibi", backend, seed=3)
    alibi.load_state_dict(plain.state_dict())
    x = torch.randn(B, T, D)
    assert not torch.allclose(alibi(x, spec(alibi, "causal"))[0], plain(x, spec(plain, "causal"))[0])
    alibi.slopes_H = torch.zeros(H)
    torch.testing.assert_close(alibi(x, spec(alibi, "causal"))[0], plain(x, spec(plain, "causal"))[0], **close)


def test_alibi_slopes_follow_the_paper():
    torch.testing.assert_close(alibi_slopes(8), torch.tensor([2.0 ** -i for i in range(1, 9)]))
    assert len(alibi_slopes(6)) == 6 and alibi_slopes(6)[:4].tolist() == alibi_slopes(4).tolist()


def test_gqa_with_all_heads_is_fused():
    fused, gqa = build("mha"), build("gqa", n_kv_heads=H, seed=4)
    gqa.load_state_dict(fused.state_dict())
    x = torch.randn(B, T, D)
    torch.testing.assert_close(gqa(x, spec(gqa, "causal"))[0], fused(x, spec(fused, "causal"))[0], **close)


def test_rotary_scores_depend_only_on_relative_position():
    rot = build("rotary", mask="bidirectional")
    v = torch.randn(1, 1, D)
    x = v.expand(1, T, D)  # the same token everywhere: scores can only differ by i - j
    _, w = rot(x, spec(rot, "bidirectional"), need_weights=True)
    for off in range(1, 4):  # the weights' log-ratios along a diagonal are constant
        d = torch.log(w).diagonal(offset=off, dim1=-2, dim2=-1) - torch.log(w).diagonal(offset=0, dim1=-2, dim2=-1)[..., :-off]
        torch.testing.assert_close(d - d[..., :1], torch.zeros_like(d), atol=1e-4, rtol=0)


@pytest.mark.parametrize("mask", MASKS)
def test_fused_equals_hugging_face_bert_self_attention(mask):
    transformers = pytest.importorskip("transformers")
    from transformers.models.bert.modeling_bert import BertSelfAttention

    conf = transformers.BertConfig(hidden_size=D, num_attention_heads=H, attention_probs_dropout_prob=0.0)
    conf._attn_implementation = "eager"
    bert = BertSelfAttention(conf, is_causal=mask == "causal").eval()
    fused = build("mha", mask=mask)
    with torch.no_grad():
        for i, lin in enumerate((bert.query, bert.key, bert.value)):
            lin.weight.copy_(fused.qkv.weight[i * D:(i + 1) * D])
            lin.bias.copy_(fused.qkv.bias[i * D:(i + 1) * D])
        fused.out.weight.copy_(torch.eye(D))  # BertSelfAttention stops before its output dense layer
        fused.out.bias.zero_()
    x, valid = torch.randn(B, T, D), pad_valid()
    allowed = spec(fused, mask, valid).allowed(T, x.device)
    additive = torch.zeros(allowed.shape).masked_fill(~allowed, torch.finfo(torch.float32).min)  # BERT's convention
    y_ref, w_ref = bert(x, attention_mask=additive)
    y, w = fused(x, spec(fused, mask, valid), need_weights=True)
    torch.testing.assert_close(y[valid], y_ref[valid], **close)
    torch.testing.assert_close(w.transpose(1, 2)[valid], w_ref.transpose(1, 2)[valid], **close)  # real query rows


@pytest.mark.parametrize("name", list(attention.registered()))
@pytest.mark.parametrize("backend", ["eager", "fast"])
def test_whole_model_has_no_causal_leak(name, backend):
    backends = [b for b in attention.get(name).backends if b not in ("eager", "flex")]  # flex: no backward on CPU
    if backend == "fast" and not backends:
        pytest.skip(f"{name} runs on eager only")
    be = "eager" if backend == "eager" else backends[0]
    extra = EXTRA.get(name, {})
    torch.manual_seed(0)
    model = Transformer(ModelConfig(d_model=D, n_heads=H, n_layers=2), AttentionConfig(name=name, backend=be, **extra), 50).eval()
    ids = torch.randint(6, 50, (2, T))
    logits = model(ids).logits
    for t in (0, 5, T - 2):
        ids2 = ids.clone()
        ids2[:, t + 1:] = torch.randint(6, 50, (2, T - t - 1))
        torch.testing.assert_close(model(ids2).logits[:, : t + 1], logits[:, : t + 1], atol=1e-5, rtol=0)


@pytest.mark.parametrize("backend", ["eager", "sdpa", "flex"])
def test_fused_head_mask_silences_a_head_on_every_backend(backend):
    from helpers.variants import output_from_weights

    fused, ref = build("mha", backend), build("mha", "eager")
    x, hm = torch.randn(B, T, D), torch.tensor([1.0, 0.0, 1.0, 1.0])
    with torch.no_grad():
        y, _ = fused(x, spec(fused, "causal"), head_mask_H=hm)
        y_ref, w_ref = ref(x, spec(ref, "causal"), need_weights=True, head_mask_H=hm)
        assert w_ref[:, 1].abs().max() == 0 and w_ref[:, 0].abs().max() > 0
        torch.testing.assert_close(y, y_ref, **close)
        torch.testing.assert_close(output_from_weights(ref, x, w_ref), y_ref, **close)
        assert not torch.allclose(y, ref(x, spec(ref, "causal"))[0])


@pytest.mark.parametrize("name", ["mha", "alibi", "rotary", "gqa", "linear", "torch_mha"])
@pytest.mark.parametrize("backend", ["eager", "fast"])
@pytest.mark.parametrize("mode", ["bf16-true", "bf16-mixed"])
def test_bf16_matches_fp32(name, backend, mode):
    """What a GPU trains in: bf16 weights (bf16-true) or fp32 weights under autocast (bf16-mixed,
    Lightning's GPU default here). CPU autocast runs the same code paths."""
    from attnexp import attention

    be = "eager" if backend == "eager" else attention.get(name).backends[1]
    mod = build(name, be)
    x, valid = torch.randn(B, T, D), pad_valid()
    y32, _ = mod(x, spec(mod, "causal", valid))
    if mode == "bf16-true":
        mod = mod.to(torch.bfloat16)
        y16, w16 = mod(x.bfloat16(), spec(mod, "causal", valid), need_weights=True)
    else:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y16, w16 = mod(x, spec(mod, "causal", valid), need_weights=True)
    assert y16.dtype == torch.bfloat16 or mode == "bf16-mixed"
    torch.testing.assert_close(y16.float()[valid], y32[valid], atol=0.15, rtol=0.05)
    torch.testing.assert_close(w16.float().sum(-1), torch.ones(w16.shape[:-1]), atol=0.02, rtol=0)


@pytest.mark.parametrize("mask", MASKS)
def test_torch_mha_maps_are_nn_multiheadattentions_own(mask):
    """torch_mha draws its maps (and runs eager) with attnexp's kernel on the module's projections,
    so that gradients reach them: they equal what nn.MultiheadAttention itself returns."""
    mod = build("torch_mha", "eager", mask)
    x, valid = torch.randn(B, T, D), pad_valid()
    y, w = mod(x, spec(mod, mask, valid), need_weights=True)
    blocked = ~spec(mod, mask, valid).allowed(T, x.device)
    blocked = blocked.expand(B, H, T, T).reshape(B * H, T, T)
    y_ref, w_ref = mod.mha(x, x, x, attn_mask=blocked, need_weights=True, average_attn_weights=False)
    torch.testing.assert_close(w, w_ref, **close)
    torch.testing.assert_close(y[valid], y_ref[valid], **close)
