"""Norms and feed-forward layers against torch's modules and the papers' formulas."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from headwise.nn import FeedForward, GLUFeedForward, LayerNorm, RMSNorm, build_feedforward
from headwise.nn.norm import build_norm


def test_layernorm_matches_torch():
    torch.manual_seed(0)
    ours, ref = LayerNorm(16, eps=1e-12).double(), torch.nn.LayerNorm(16, eps=1e-12).double()
    with torch.no_grad():
        ours.weight.normal_()
        ours.bias.normal_()
        ref.weight.copy_(ours.weight)
        ref.bias.copy_(ours.bias)
    x = torch.randn(3, 5, 16, dtype=torch.float64)
    torch.testing.assert_close(ours(x), ref(x))


def test_rmsnorm_formula():
    torch.manual_seed(1)
    norm = RMSNorm(8, eps=1e-6).double()
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    x = torch.randn(4, 8, dtype=torch.float64)
    expect = x / torch.sqrt((x**2).mean(-1, keepdim=True) + 1e-6) * norm.weight
    torch.testing.assert_close(norm(x), expect)


@pytest.mark.parametrize("kind", ["layernorm", "rmsnorm"])
def test_statistics_in_float32_under_autocast(kind):
    torch.manual_seed(2)
    norm = build_norm(kind, 64, 1e-5)
    x = (torch.randn(2, 10, 64) * 50 + 1000).to(torch.bfloat16)  # large mean: bf16 stats fail
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = norm(x)
    assert y.dtype == torch.bfloat16
    ref = norm(x.float())
    torch.testing.assert_close(y.float(), ref, atol=0.05, rtol=0.02)
    with pytest.raises(ValueError, match="norm must be one of"):
        build_norm("batchnorm", 4, 1e-5)


def test_feedforward_formula():
    torch.manual_seed(3)
    ffn = FeedForward(8, 16, "relu").double()
    x = torch.randn(2, 3, 8, dtype=torch.float64)
    expect = F.relu(x @ ffn.w1.weight.T + ffn.w1.bias) @ ffn.w2.weight.T + ffn.w2.bias
    torch.testing.assert_close(ffn(x), expect)


@pytest.mark.parametrize("variant,act", [("swiglu", F.silu), ("geglu", F.gelu), ("reglu", F.relu)])
def test_glu_variants_formula(variant, act):
    torch.manual_seed(4)
    ffn = GLUFeedForward(8, 12, variant).double()
    x = torch.randn(2, 3, 8, dtype=torch.float64)
    w1, w3 = ffn.w13.weight[:12], ffn.w13.weight[12:]
    expect = (act(x @ w1.T) * (x @ w3.T)) @ ffn.w2.weight.T
    torch.testing.assert_close(ffn(x), expect)
    assert isinstance(build_feedforward(variant, 8, 12), GLUFeedForward)
    with pytest.raises(ValueError, match="activation must be one of"):
        build_feedforward("tanh", 8, 12)
