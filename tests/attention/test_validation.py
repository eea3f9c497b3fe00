"""Bad input gets a clear error naming the problem; the dispatcher's choices."""

from __future__ import annotations

import pytest
import torch

from headwise.attention import MultiHeadAttention, attend, select_backend
from headwise.attention import masks as M


def _qkv(b=2, h=4, hk=2, lq=5, lk=6, d=8, dv=8):
    return torch.randn(b, h, lq, d), torch.randn(b, hk, lk, d), torch.randn(b, hk, lk, dv)


def test_mismatched_head_dims():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="head dims differ: q has 8, k has 4"):
        attend(q, k[..., :4], v)


def test_heads_not_a_multiple_of_kv_heads():
    q, k, v = _qkv(h=3, hk=2)
    with pytest.raises(ValueError, match=r"q heads \(3\) must be a multiple of k/v heads \(2\)"):
        attend(q, k, v)


def test_rank_batch_and_dtype_errors():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="q must be 4-D"):
        attend(q[0], k, v)
    with pytest.raises(ValueError, match="batch sizes differ"):
        attend(q, k[:1], v[:1])
    with pytest.raises(TypeError, match="share a dtype"):
        attend(q, k.double(), v)
    with pytest.raises(ValueError, match="k and v must agree"):
        attend(q, k, v[:, :, :3])


def test_mask_wrong_dtype_is_refused_not_cast():
    q, k, v = _qkv()
    with pytest.raises(TypeError, match="boolean tensor .* got torch.float32.*bias="):
        attend(q, k, v, torch.zeros(5, 6))


@pytest.mark.parametrize("shape", [(6, 5), (2, 3, 5, 6), (3, 1, 5, 6), (5,), (1, 1, 1, 5, 6)])
def test_mask_wrong_shape_is_refused_not_broadcast(shape):
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="mask"):
        attend(q, k, v, torch.ones(shape, dtype=torch.bool))


def test_pattern_for_another_batch():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="pattern is for batch 3"):
        attend(q, k, v, M.key_padding([1, 2, 3]))


def test_backend_option_errors():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="unknown backend 'fast'"):
        attend(q, k, v, backend="fast")
    with pytest.raises(ValueError, match="return_weights=True needs backend='math'"):
        attend(q, k, v, backend="sdpa", return_weights=True)
    with pytest.raises(ValueError, match="has no attention dropout"):
        attend(q, k, v, backend="tiled", dropout_p=0.1)
    with pytest.raises(ValueError, match="dropout_p must be in"):
        attend(q, k, v, dropout_p=1.0)
    with pytest.raises(TypeError, match="no.*float64|not torch.float64"):
        attend(q.double(), k.double(), v.double(), backend="flex")
    with pytest.raises(RuntimeError, match="no backward pass on cpu"):
        attend(q.requires_grad_(), k, v, backend="flex")
    with pytest.raises(TypeError, match="bias must be a floating-point"):
        attend(q.detach(), k, v, bias=torch.ones(5, 6, dtype=torch.bool))


def test_mha_constructor_errors():
    with pytest.raises(ValueError, match=r"num_heads \(6\) must be divisible by num_kv_heads"):
        MultiHeadAttention(48, 6, num_kv_heads=4)
    with pytest.raises(ValueError, match=r"d_model \(50\) must be divisible by num_heads \(8\)"):
        MultiHeadAttention(50, 8)
    with pytest.raises(ValueError, match="fusion must be one of"):
        MultiHeadAttention(32, 4, fusion="sum")
    mha = MultiHeadAttention(32, 4)
    with pytest.raises(ValueError, match=r"x must be \(batch, seq, 32\)"):
        mha(torch.randn(2, 5, 16))


def test_dispatcher_choices():
    q, k, _ = _qkv()
    assert select_backend(q, k, return_weights=True) == "math"
    assert select_backend(q, k) == "sdpa"
    assert select_backend(q, k, M.causal()) == "sdpa"
    long_q = torch.randn(1, 2, 8192, 8)
    assert select_backend(long_q, long_q, M.sliding_window(128)) == "blocksparse"
    assert select_backend(long_q, long_q, M.causal()) == "sdpa"  # SDPA skips causal tiles
    assert select_backend(long_q, long_q, M.sliding_window(128), dropout_p=0.1) == "blocksparse"
    short = torch.randn(1, 2, 256, 8)
    assert select_backend(short, short, M.sliding_window(16)) == "sdpa"


def test_auto_gives_the_reference_answer_on_a_long_sparse_pattern():
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 2, 4096, 8, generator=g)
    pattern = M.sliding_window(64) | M.global_tokens([0])
    out = attend(q, q, q, pattern)  # routed to "blocksparse"
    torch.testing.assert_close(out, attend(q, q, q, pattern, backend="sdpa"), atol=1e-5, rtol=0)
