"""Linear attention against explicit float64 quadratic references; FAVOR+ error vs softmax."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from headwise.attention import attend, linear, linear_attention
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


# --- streaming in blocks ---------------------------------------------------------------------
def _direct(fq, fk, v, causal):
    """phi(q) (phi(k)^T v) / phi(q) . sum phi(k); causal: prefix sums of phi(k_j) v_j^T."""
    rep = fq.shape[1] // fk.shape[1]
    fk, v = fk.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    if causal:
        state = (fk[..., :, None] * v[..., None, :]).cumsum(-3)  # (B, H, L, m, dv)
        num = torch.einsum("bhlm,bhlmd->bhld", fq, state)
        den = (fq * fk.cumsum(-2)).sum(-1, keepdim=True)
    else:
        num = fq @ (fk.transpose(-1, -2) @ v)
        den = fq @ fk.sum(-2)[..., None]
    return num / den


def _reference(q, k, v, fm, causal, num_features=None, seed=0):
    if fm == "elu":
        return _direct(F.elu(q) + 1, F.elu(k) + 1, v, causal)
    w = orthogonal_features(num_features, q.shape[-1], seed=seed, dtype=torch.float64)
    return _direct(favor_features(q, w, is_query=True), favor_features(k, w, is_query=False),
                   v, causal)


@pytest.fixture
def block8(monkeypatch):
    monkeypatch.setattr(linear, "BLOCK_SIZE", 8)
    monkeypatch.setattr(linear, "CAUSAL_BLOCK_SIZE", 8)


@pytest.mark.parametrize("fm", ["elu", "favor"])
@pytest.mark.parametrize("lq, lk", [(5, 5), (8, 8), (16, 16), (17, 17), (40, 40), (3, 29),
                                    (21, 8), (9, 1)])
def test_noncausal_blocks_equal_direct_formula(block8, fm, lq, lk):
    q, k, v = _qkv(lq=lq, lk=lk)  # grouped queries: 4 heads over 2 kv heads
    nf = 12 if fm == "favor" else None
    out = linear_attention(q, k, v, fm, num_features=nf)
    assert (out - _reference(q, k, v, fm, False, nf)).abs().max() < 1e-10


@pytest.mark.parametrize("fm", ["elu", "favor"])
@pytest.mark.parametrize("n", [5, 8, 16, 17, 40])
@pytest.mark.parametrize("chunk", [1, 3, 8, 16, 64])  # blocks of 8, 6, 8, 16, 64 rows
def test_causal_blocks_equal_direct_formula(block8, fm, n, chunk):
    q, k, v = _qkv(lq=n, lk=n)
    nf = 12 if fm == "favor" else None
    out = linear_attention(q, k, v, fm, True, num_features=nf, chunk_size=chunk)
    assert (out - _reference(q, k, v, fm, True, nf)).abs().max() < 1e-10


@pytest.mark.parametrize("fm", ["elu", "favor"])
@pytest.mark.parametrize("n", [11, 12, 13, 40])
def test_causal_blocks_of_several_chunks(monkeypatch, fm, n):
    monkeypatch.setattr(linear, "CAUSAL_BLOCK_SIZE", 13)  # 4 chunks of 3 per block
    q, k, v = _qkv(lq=n, lk=n)
    nf = 12 if fm == "favor" else None
    out = linear_attention(q, k, v, fm, True, num_features=nf, chunk_size=3)
    assert (out - _reference(q, k, v, fm, True, nf)).abs().max() < 1e-10


@pytest.mark.parametrize("causal", [False, True])
def test_default_block_size_on_a_sequence_of_several_blocks(causal):
    n = 2 * max(linear.BLOCK_SIZE, linear.CAUSAL_BLOCK_SIZE) + 37
    q, k, v = _qkv(b=1, h=2, hk=1, lq=n, lk=n, d=4, dv=3)
    for fm, nf in (("elu", None), ("favor", 8)):
        out = linear_attention(q, k, v, fm, causal, num_features=nf)
        assert (out - _reference(q, k, v, fm, causal, nf)).abs().max() < 1e-10


@pytest.mark.parametrize("causal", [False, True])
def test_favor_key_stabiliser_grows_across_blocks(block8, causal):
    # keys grow along the sequence, so each block raises the running maximum and the
    # state summed so far is rescaled; the result is that of one stabiliser for all keys
    q, k, v = _qkv(lq=40, lk=40, d=8)
    k = k * torch.linspace(0.2, 4.0, 40, dtype=torch.float64)[:, None]
    out = linear_attention(q, k, v, "favor", causal, num_features=16, chunk_size=3)
    assert (out - _reference(q, k, v, "favor", causal, 16)).abs().max() < 1e-10


@pytest.mark.parametrize("causal", [False, True])
def test_inference_writes_the_same_result_as_autograd(block8, causal):
    q, k, v = _qkv(lq=19, lk=19)
    with torch.no_grad():
        ref = linear_attention(q, k, v, "favor", causal, num_features=12, chunk_size=3)
    q.requires_grad_()
    out = linear_attention(q, k, v, "favor", causal, num_features=12, chunk_size=3)
    assert out.requires_grad
    torch.testing.assert_close(out.detach(), ref, atol=1e-14, rtol=0)


@pytest.mark.parametrize("fm", ["elu", "favor"])
@pytest.mark.parametrize("causal", [False, True])
def test_gradcheck_with_tiny_blocks(monkeypatch, fm, causal):
    monkeypatch.setattr(linear, "BLOCK_SIZE", 3)
    monkeypatch.setattr(linear, "CAUSAL_BLOCK_SIZE", 4)  # blocks of 2 chunks of 2
    q, k, v = _qkv(b=1, h=2, hk=1, lq=8, lk=8, d=3, dv=2)
    args = tuple(t.requires_grad_() for t in (q, k, v))

    def fn(q, k, v):
        return linear_attention(q, k, v, fm, causal, num_features=5 if fm == "favor" else None,
                                chunk_size=2)

    assert torch.autograd.gradcheck(fn, args)


@pytest.mark.parametrize("fm", ["elu", "favor"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("block", [8, 64])  # several blocks, one block
def test_sequence_major_layout(monkeypatch, fm, causal, block):
    # q, k, v as (batch, seq, heads, d) transposed: no block is contiguous in heads
    monkeypatch.setattr(linear, "BLOCK_SIZE", block)
    monkeypatch.setattr(linear, "CAUSAL_BLOCK_SIZE", block)
    q, k, v = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in _qkv(lq=30, lk=30))
    assert not q.is_contiguous()
    nf = 12 if fm == "favor" else None
    for chunk in (5, 7):  # chunks that divide the length and that do not
        out = linear_attention(q, k, v, fm, causal, num_features=nf, chunk_size=chunk)
        assert (out - _reference(q, k, v, fm, causal, nf)).abs().max() < 1e-10


@pytest.mark.parametrize("fm", ["elu", "favor"])
def test_no_keys_give_zeros(fm):
    q, k, v = _qkv(lq=4, lk=0)
    out = linear_attention(q, k, v, fm, num_features=8 if fm == "favor" else None)
    assert out.shape == (2, 4, 4, 6) and not out.any()
    for causal in (False, True):
        empty = linear_attention(*_qkv(lq=0, lk=0), fm, causal,
                                 num_features=8 if fm == "favor" else None)
        assert empty.shape == (2, 4, 0, 6)
