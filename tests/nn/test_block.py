"""Encoder/decoder layers reproduce torch.nn.TransformerEncoderLayer / DecoderLayer."""

from __future__ import annotations

import pytest
import torch

from headwise.attention import KVCache
from headwise.attention import masks as M
from headwise.nn import DecoderLayer, EncoderLayer, maybe_checkpoint


def _copy_attn(ours, ref):
    ref.in_proj_weight.copy_(ours.in_proj.weight)
    ref.in_proj_bias.copy_(ours.in_proj.bias)
    ref.out_proj.weight.copy_(ours.out_proj.weight)
    ref.out_proj.bias.copy_(ours.out_proj.bias)


def _copy_common(ours, ref, norms):
    ref.linear1.weight.copy_(ours.ffn.w1.weight)
    ref.linear1.bias.copy_(ours.ffn.w1.bias)
    ref.linear2.weight.copy_(ours.ffn.w2.weight)
    ref.linear2.bias.copy_(ours.ffn.w2.bias)
    for o, r in norms:
        r.weight.copy_(o.weight)
        r.bias.copy_(o.bias)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer_matches_torch(norm_first, activation):
    torch.manual_seed(0)
    ours = EncoderLayer(32, 4, 64, dropout=0.0, activation=activation, norm_first=norm_first)
    ref = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation=activation,
                                           batch_first=True, norm_first=norm_first)
    ours, ref = ours.double().eval(), ref.double().eval()
    with torch.no_grad():
        _copy_attn(ours.attn, ref.self_attn)
        _copy_common(ours, ref, [(ours.norm1, ref.norm1), (ours.norm2, ref.norm2)])
    x = torch.randn(2, 7, 32, dtype=torch.float64)
    pad = torch.tensor([[False] * 7, [False] * 4 + [True] * 3])
    expect = ref(x, src_key_padding_mask=pad)
    got = ours(x, mask=M.key_padding([7, 4]))
    torch.testing.assert_close(got[0], expect[0])
    torch.testing.assert_close(got[1, :4], expect[1, :4])


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_torch(norm_first):
    torch.manual_seed(1)
    ours = DecoderLayer(32, 4, 64, dropout=0.0, activation="relu", norm_first=norm_first)
    ref = torch.nn.TransformerDecoderLayer(32, 4, 64, dropout=0.0, activation="relu",
                                           batch_first=True, norm_first=norm_first)
    ours, ref = ours.double().eval(), ref.double().eval()
    with torch.no_grad():
        _copy_attn(ours.self_attn, ref.self_attn)
        _copy_attn(ours.cross_attn, ref.multihead_attn)
        _copy_common(ours, ref, [(ours.norm1, ref.norm1), (ours.norm2, ref.norm2),
                                 (ours.norm3, ref.norm3)])
    x = torch.randn(2, 6, 32, dtype=torch.float64)
    mem = torch.randn(2, 9, 32, dtype=torch.float64)
    causal = torch.ones(6, 6, dtype=torch.bool).triu(1)
    mem_pad = torch.tensor([[False] * 9, [False] * 5 + [True] * 4])
    expect = ref(x, mem, tgt_mask=causal, memory_key_padding_mask=mem_pad)
    got = ours(x, mem, M.causal(), M.key_padding([9, 5]))
    torch.testing.assert_close(got, expect)
    # incremental decoding with both caches gives the same outputs
    sc = KVCache(2, 6, 4, 8, dtype=torch.float64)
    mc = KVCache(2, 9, 4, 8, dtype=torch.float64)
    steps = [ours(x[:, t: t + 1], mem, None, M.key_padding([9, 5]), self_cache=sc,
                  memory_cache=mc) for t in range(6)]
    torch.testing.assert_close(torch.cat(steps, 1), expect)


def test_gradient_checkpointing_gives_the_same_gradients():
    torch.manual_seed(2)
    layer = EncoderLayer(16, 2, 32, dropout=0.0).double()
    x = torch.randn(2, 5, 16, dtype=torch.float64, requires_grad=True)
    grads = []
    for enabled in (False, True):
        out = maybe_checkpoint(enabled, layer, x, M.causal())
        grads.append(torch.autograd.grad(out.sum(), [x, *layer.parameters()]))
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b)
