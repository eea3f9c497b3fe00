"""LSH attention against dense shared-QK attention (float64), and its quality per hash count."""

from __future__ import annotations

import pytest
import torch

from headwise.attention import lsh_attention
from headwise.attention.lsh import (
    SELF_MASK_VALUE,
    lsh_approximation_error,
    lsh_buckets,
    shared_qk_attention,
)


def _inputs(b=2, h=3, n=37, d=8, dv=5, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    qk = torch.randn(b, h, n, d, generator=g, dtype=torch.float64) * scale
    v = torch.randn(b, h, n, dv, generator=g, dtype=torch.float64)
    return qk, v


def _explicit_reference(qk, v, causal, keep=None):
    """Loops written from the definition: softmax over keys of q . k / (|k| sqrt(d))."""
    b, h, n, d = qk.shape
    out = torch.zeros(b, h, n, v.shape[-1], dtype=torch.float64)
    for bi in range(b):
        for hi in range(h):
            x = qk[bi, hi]
            s = x @ (x / x.norm(dim=-1, keepdim=True)).T / d**0.5
            for i in range(n):
                row = s[i].clone()
                row[i] = SELF_MASK_VALUE
                allowed = torch.ones(n, dtype=torch.bool)
                if causal:
                    allowed[i + 1:] = False
                if keep is not None:
                    allowed &= keep[bi]
                if allowed.any():
                    w = torch.softmax(row.masked_fill(~allowed, float("-inf")), 0)
                    out[bi, hi, i] = w @ v[bi, hi]
    return out


@pytest.mark.parametrize("causal", [False, True])
def test_dense_reference_matches_explicit_loops(causal):
    qk, v = _inputs(n=12)
    keep = torch.rand(2, 12, generator=torch.Generator().manual_seed(1)) > 0.3
    keep[1] = False
    for mask in (None, keep):
        torch.testing.assert_close(shared_qk_attention(qk, v, causal, mask=mask),
                                   _explicit_reference(qk, v, causal, mask), atol=1e-12, rtol=0)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("num_buckets", [2, 4])
def test_one_chunk_one_hash_is_dense_shared_qk_attention(causal, num_buckets):
    qk, v = _inputs()
    ref = shared_qk_attention(qk, v, causal)
    for chunk in (37, 64):
        out = lsh_attention(qk, v, num_buckets, 1, chunk_size=chunk, causal=causal)
        assert (out - ref).abs().max() < 1e-12


def test_one_chunk_many_hashes_is_still_dense():
    # every round sees every key: duplicates are discounted, so the union is exact
    qk, v = _inputs()
    out = lsh_attention(qk, v, 4, num_hashes=3, chunk_size=64)
    assert (out - shared_qk_attention(qk, v)).abs().max() < 1e-12


def _windows(buckets, n, chunk):
    """(n, n) bool: key j is in query i's chunk or the chunk before, in the sorted order."""
    order = sorted(range(n), key=lambda i: (int(buckets[i]), i))
    chunk_of = {p: r // chunk for r, p in enumerate(order)}
    return torch.tensor([[chunk_of[j] - chunk_of[i] in (0, -1) for j in range(n)]
                         for i in range(n)])


@pytest.mark.parametrize("num_hashes", [1, 3])
def test_rounds_combine_to_softmax_over_the_union_of_windows(num_hashes):
    # from the definition: sort by (bucket, position) per round, chunk, look one back; the
    # combined rounds are softmax over every key seen in any round (duplicates once)
    n, chunk = 40, 8
    qk, v = _inputs(n=n, seed=3)
    out = lsh_attention(qk, v, 4, num_hashes, chunk_size=chunk, seed=5)
    buckets = lsh_buckets(qk, 4, num_hashes, seed=5)
    ref = torch.zeros_like(out)
    for bi in range(2):
        for hi in range(3):
            seen = torch.zeros(n, n, dtype=torch.bool)
            for r in range(num_hashes):
                seen |= _windows(buckets[bi, hi, r], n, chunk)
            x = qk[bi, hi]
            s = x @ (x / x.norm(dim=-1, keepdim=True)).T / 8**0.5
            s.fill_diagonal_(SELF_MASK_VALUE)
            ref[bi, hi] = torch.softmax(s.masked_fill(~seen, float("-inf")), -1) @ v[bi, hi]
    assert (out - ref).abs().max() < 1e-12


def test_quality_improves_with_more_hashes():
    qk, v = _inputs(b=1, h=4, n=256, d=16, seed=7, scale=2.0)
    errs = [sum(lsh_approximation_error(qk, v, 8, r, 32, seed=s) for s in range(3)) / 3
            for r in (1, 2, 4, 8)]
    assert errs[0] > errs[1] > errs[2] > errs[3]
    assert errs[3] < 0.5 * errs[0]


def test_causal_never_sees_the_future():
    # same qk, so the same buckets and chunks; later values must not reach earlier outputs
    qk, v = _inputs(n=48)
    out = lsh_attention(qk, v, 4, 2, chunk_size=8, causal=True)
    v2 = v.clone()
    v2[:, :, 30:] = 100.0
    out2 = lsh_attention(qk, v2, 4, 2, chunk_size=8, causal=True)
    assert torch.equal(out[:, :, :30], out2[:, :, :30])
    torch.testing.assert_close(out[:, :, 0], v[:, :, 0])  # position 0 sees only itself


def test_key_padding_mask_and_fully_masked_rows():
    qk, v = _inputs(n=20)
    keep = torch.ones(2, 20, dtype=torch.bool)
    keep[0, 15:] = False
    keep[1] = False
    q = qk.clone().requires_grad_()
    out = lsh_attention(q, v, 2, 2, chunk_size=32, mask=keep)
    ref = shared_qk_attention(qk, v, mask=keep)
    assert (out - ref).abs().max() < 1e-12
    assert (out[1] == 0).all()
    (g,) = torch.autograd.grad(out.sum(), (q,))
    assert torch.isfinite(g).all() and (g[1] == 0).all()


def test_gradients_flow_and_match_dense_in_one_chunk():
    qk, v = _inputs(b=1, h=2, n=16, d=4, dv=3)
    a, b = qk.clone().requires_grad_(), v.clone().requires_grad_()
    ga = torch.autograd.grad(lsh_attention(a, b, 2, 1, 16, causal=True).square().sum(), (a, b))
    a2, b2 = qk.clone().requires_grad_(), v.clone().requires_grad_()
    gr = torch.autograd.grad(shared_qk_attention(a2, b2, True).square().sum(), (a2, b2))
    for x, y in zip(ga, gr, strict=True):
        torch.testing.assert_close(x, y, atol=1e-10, rtol=1e-8)


def test_gradcheck_multi_round_chunked():
    qk, v = _inputs(b=1, h=1, n=10, d=3, dv=2, seed=2)
    args = (qk.requires_grad_(), v.requires_grad_())

    def fn(qk, v):
        return lsh_attention(qk, v, 4, 2, chunk_size=3, causal=True, seed=1)

    assert torch.autograd.gradcheck(fn, args)


def test_half_precision_runs_in_float32():
    qk, v = _inputs(n=30)
    ref = lsh_attention(qk, v, 4, 2, chunk_size=8)
    out = lsh_attention(qk.bfloat16(), v.bfloat16(), 4, 2, chunk_size=8)
    assert out.dtype == torch.bfloat16 and torch.isfinite(out).all()
    assert (out.double() - ref).abs().max() < 0.1


@pytest.mark.parametrize("nb", [3, 0, -2, 1, 2.0])
def test_bad_bucket_counts(nb):
    qk, v = _inputs()
    with pytest.raises(ValueError, match="num_buckets must be"):
        lsh_attention(qk, v, nb)


def test_other_errors():
    qk, v = _inputs()
    with pytest.raises(ValueError, match="num_hashes must be an int >= 1"):
        lsh_attention(qk, v, 4, num_hashes=0)
    with pytest.raises(ValueError, match="chunk_size must be an int >= 1"):
        lsh_attention(qk, v, 4, chunk_size=0)
    with pytest.raises(ValueError, match="must agree"):
        lsh_attention(qk, v[:, :, :5], 4)
    with pytest.raises(ValueError, match="keep-mask"):
        lsh_attention(qk, v, 4, mask=torch.ones(2, 5, dtype=torch.bool))
