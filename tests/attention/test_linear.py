"""Linear attention against explicit float64 quadratic references; FAVOR+ error vs softmax."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from headwise.attention import attend, linear_attention
from headwise.attention.linear import (
    approximation_error,
    favor_features,
    orthogonal_features,
)


def _qkv(b=2, h=4, hk=2, lq=50, lk=50, d=8, dv=6, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, lq, d, generator=g, dtype=torch.float64) * scale
    k = torch.randn(b, hk, lk, d, generator=g, dtype=torch.float64) * scale
    v = torch.randn(b, hk, lk, dv, generator=g, dtype=torch.float64)
    return q, k, v


def _quadratic(fq, fk, v, causal):
    """phi(Q) phi(K)^T (causally masked), row-normalised, times V; kv heads repeated."""
    rep = fq.shape[1] // fk.shape[1]
    fk, v = fk.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    a = fq @ fk.transpose(-1, -2)
    if causal:
        a = a.tril()
    return (a / a.sum(-1, keepdim=True)) @ v


@pytest.mark.parametrize("causal", [False, True])
def test_elu_equals_quadratic_reference(causal):
    q, k, v = _qkv()
    ref = _quadratic(F.elu(q) + 1, F.elu(k) + 1, v, causal)
    out = linear_attention(q, k, v, "elu", causal)
    assert (out - ref).abs().max() < 1e-10


@pytest.mark.parametrize("chunk", [1, 7, 16, 50, 64])
def test_causal_chunked_scan_matches_quadratic_for_any_chunk(chunk):
    q, k, v = _qkv(lq=50, lk=50)
    ref = _quadratic(F.elu(q) + 1, F.elu(k) + 1, v, True)
    assert (linear_attention(q, k, v, "elu", True, chunk_size=chunk) - ref).abs().max() < 1e-10
    w = orthogonal_features(32, 8, seed=3, dtype=torch.float64)
    ref_f = _quadratic(favor_features(q, w, is_query=True), favor_features(k, w, is_query=False),
                       v, True)
    out_f = linear_attention(q, k, v, "favor", True, num_features=32, seed=3, chunk_size=chunk)
    assert (out_f - ref_f).abs().max() < 1e-10


def test_noncausal_cross_lengths():
    q, k, v = _qkv(lq=13, lk=40)
    ref = _quadratic(F.elu(q) + 1, F.elu(k) + 1, v, False)
    assert (linear_attention(q, k, v) - ref).abs().max() < 1e-10


def test_favor_features_estimate_the_softmax_kernel_without_bias():
    # E[phi(x) . phi(y)] = exp(x . y / sqrt(d)): the mean over 200 projections is within
    # about 3 standard errors (~0.05 here) of the exact kernel
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 8, dtype=torch.float64, generator=g) * 0.3
    xs = x * 8 ** -0.25
    estimates = []
    for seed in range(200):
        w = orthogonal_features(32, 8, seed=seed, dtype=torch.float64)
        f = favor_features(x, w, is_query=False)  # both rows share one stabiliser c
        c = (xs @ w.T - 0.5 * xs.pow(2).sum(-1, keepdim=True)).max()
        estimates.append((f[0] @ f[1]).item() * torch.exp(2 * c).item())
    exact = torch.exp(x[0] @ x[1] / 8 ** 0.5).item()
    assert abs(sum(estimates) / len(estimates) - exact) / exact < 0.05


def test_orthogonal_features_rows_are_orthogonal_in_blocks():
    w = orthogonal_features(20, 8, seed=0, dtype=torch.float64)
    block = w[:8] / w[:8].norm(dim=1, keepdim=True)
    torch.testing.assert_close(block @ block.T, torch.eye(8, dtype=torch.float64))
    assert torch.equal(w, orthogonal_features(20, 8, seed=0, dtype=torch.float64))


@pytest.mark.parametrize("causal", [False, True])
def test_favor_error_falls_as_features_grow(causal):
    errs = []
    for m in (16, 64, 256):
        e = [approximation_error(*_qkv(b=1, h=2, hk=2, lq=64, lk=64, d=16, seed=s, scale=0.5),
                                 "favor", causal, num_features=m, seed=s) for s in range(4)]
        errs.append(sum(e) / len(e))
    # measured: about 0.46, 0.27, 0.16 (non-causal) and 0.35, 0.19, 0.13 (causal)
    assert errs[0] > errs[1] > errs[2]
    assert errs[2] < 0.5 * errs[0]


def test_approximation_error_of_elu_is_reported_not_zero():
    q, k, v = _qkv(b=1, h=2, hk=2, lq=32, lk=32)
    exact = attend(q, k, v, backend="math")
    out = linear_attention(q, k, v, "elu")
    err = approximation_error(q, k, v, "elu")
    assert err == pytest.approx(float((out - exact).norm() / exact.norm()))
    assert err > 0.01


@pytest.mark.parametrize("fm", ["elu", "favor"])
@pytest.mark.parametrize("causal", [False, True])
def test_gradients_flow_and_match_quadratic(fm, causal):
    q, k, v = _qkv(b=1, h=2, hk=1, lq=20, lk=20, d=4, dv=3)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    out = linear_attention(q, k, v, fm, causal, num_features=8 if fm == "favor" else None,
                           chunk_size=6)
    grads = torch.autograd.grad(out.square().sum(), (q, k, v))
    if fm == "elu":
        ref = _quadratic(F.elu(q) + 1, F.elu(k) + 1, v, causal)
    else:
        w = orthogonal_features(8, 4, seed=0, dtype=torch.float64)
        ref = _quadratic(favor_features(q, w, is_query=True),
                         favor_features(k, w, is_query=False), v, causal)
    ref_grads = torch.autograd.grad(ref.square().sum(), (q, k, v))
    for g, r in zip(grads, ref_grads, strict=True):
        assert torch.isfinite(g).all() and g.abs().sum() > 0
        torch.testing.assert_close(g, r, atol=1e-10, rtol=1e-8)


def test_gradcheck_causal_favor():
    q, k, v = _qkv(b=1, h=1, hk=1, lq=7, lk=7, d=3, dv=2)
    args = tuple(t.requires_grad_() for t in (q, k, v))

    def fn(q, k, v):
        return linear_attention(q, k, v, "favor", True, num_features=5, chunk_size=3)

    assert torch.autograd.gradcheck(fn, args)


def test_float32_and_bfloat16_run_in_float32():
    q, k, v = _qkv(lq=40, lk=40)
    ref = linear_attention(q, k, v, "favor", True, num_features=16)
    for dtype, tol in ((torch.float32, 1e-5), (torch.bfloat16, 5e-2)):
        out = linear_attention(q.to(dtype), k.to(dtype), v.to(dtype), "favor", True,
                               num_features=16)
        assert out.dtype == dtype
        assert (out.double() - ref).abs().max() < tol


def test_large_inputs_stay_finite():
    q, k, v = _qkv(lq=64, lk=64, d=16, scale=30.0)
    for causal in (False, True):
        out = linear_attention(q.float(), k.float(), v.float(), "favor", causal)
        assert torch.isfinite(out).all()


def test_errors():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="feature_map must be one of"):
        linear_attention(q, k, v, "relu")
    with pytest.raises(ValueError, match="causal linear attention needs q_len == k_len"):
        linear_attention(*_qkv(lq=5, lk=6), causal=True)
    with pytest.raises(ValueError, match=r"q heads \(3\) must be a multiple"):
        linear_attention(*_qkv(h=3, hk=2))
    with pytest.raises(ValueError, match="chunk_size must be a positive int"):
        linear_attention(q, k, v, causal=True, chunk_size=0)
    with pytest.raises(ValueError, match="num_features must be a positive int"):
        linear_attention(q, k, v, "favor", num_features=0)
    with pytest.raises(ValueError, match="num_features applies to feature_map='favor'"):
        linear_attention(q, k, v, "elu", num_features=16)
    with pytest.raises(ValueError, match="must be 4-D"):
        linear_attention(q[0], k, v)
