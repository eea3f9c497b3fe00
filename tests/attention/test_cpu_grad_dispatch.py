"""The dispatcher's rule for gradients over short keys on the CPU (``select_backend`` rule 4):
which requests it takes to the math kernel, and that what it computes there (outputs and
the gradients of q, k, v) is the float64 reference's and SDPA's."""

import pytest
import torch

from headwise.attention import MultiHeadAttention, attend, kernels, select_backend
from headwise.attention import masks as M
from headwise.attention.kernels import CPU_GRAD_MATH_MAX_KEYS, CPU_GRAD_MATH_MIN_SCORES


def _qkv(b=3, h=4, hk=4, lq=7, lk=7, d=8, dtype=torch.float32, grad=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = [torch.randn(b, n, length, d, generator=g).to(dtype)
           for n, length in ((h, lq), (hk, lk), (hk, lk))]
    return [t.requires_grad_(grad) for t in out]


def _reference(q, k, v, keep):
    """softmax(q k^T / sqrt(d)) v in float64, a row with no allowed key giving zeros."""
    q, k, v = (t.double() for t in (q, k, v))
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    w = torch.softmax(scores, -1).nan_to_num(0.0)
    return w @ v


@pytest.fixture
def any_size(monkeypatch):
    """The rule without its minimum size, so that small inputs exercise the math kernel."""
    monkeypatch.setattr(kernels, "CPU_GRAD_MATH_MIN_SCORES",
                        dict.fromkeys(CPU_GRAD_MATH_MIN_SCORES, 0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gradients_over_short_keys_take_the_math_kernel(dtype):
    limit, least = CPU_GRAD_MATH_MAX_KEYS[dtype], CPU_GRAD_MATH_MIN_SCORES[dtype]
    for lk in (15, limit):
        b = -(-least // (4 * lk * lk))  # just enough rows of 4 heads for the minimum
        q, k, _ = _qkv(b=b, lq=lk, lk=lk, d=4, dtype=dtype)
        assert select_backend(q, k) == "math"
        assert select_backend(q, k, M.key_padding([lk, 1] + [lk] * (b - 2))) == "math"
        assert select_backend(q, k, M.causal()) == "math"
        small, small_k, _ = _qkv(b=b - 1, lq=lk, lk=lk, d=4, dtype=dtype)
        if (b - 1) * 4 * lk * lk < least:  # fewer scores than the minimum: SDPA
            assert select_backend(small, small_k) == "sdpa"
    q, k, _ = _qkv(b=64, lq=limit + 1, lk=limit + 1, d=4, dtype=dtype)
    assert select_backend(q, k) == "sdpa"  # more keys than the limit


def test_a_fine_tuning_batch_and_an_explanation_of_one_short_text():
    # a batch of 32 texts of 15 tokens on 12 heads: the math kernel
    q, k, _ = _qkv(b=32, h=12, hk=12, lq=15, lk=15, d=4)
    assert select_backend(q, k) == "math"
    # integrated gradients' 4 points of one 15-token text on 8 heads: SDPA
    q, k, _ = _qkv(b=4, h=8, hk=8, lq=15, lk=15, d=4)
    assert select_backend(q, k) == "sdpa"


def test_the_rule_needs_gradients_and_the_cpu_dtypes_it_was_measured_on(any_size):
    q, k, _ = _qkv(lk=8)
    with torch.no_grad():
        assert select_backend(q, k) == "sdpa"
    with torch.inference_mode():
        assert select_backend(q.detach(), k.detach()) == "sdpa"
    assert select_backend(q.detach(), k.detach()) == "sdpa"  # nothing requires gradients
    assert select_backend(q.detach(), k) == "math"  # k's gradient is enough
    for dtype in (torch.float64, torch.float16):  # not measured: SDPA
        q64, k64, _ = _qkv(lk=8, dtype=dtype)
        assert select_backend(q64, k64) == "sdpa"
    # the other rules keep their order: weights, then sparse patterns
    assert select_backend(q, k, return_weights=True) == "math"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit.trace itself
def test_not_while_tracing(any_size):
    q, k, _ = _qkv(lk=8)
    seen = []

    def probe(q, k):
        seen.append(select_backend(q, k))
        return q * 1

    torch.jit.trace(probe, (q, k), check_trace=False)
    assert seen == ["sdpa"]


@pytest.mark.parametrize("lengths", [[7, 7, 7], [7, 3, 1], [7, 0, 5]])
@pytest.mark.parametrize("hk", [4, 2, 1])
def test_auto_matches_the_float64_reference_and_sdpa_with_gradients(lengths, hk, any_size):
    q, k, v = _qkv(hk=hk)
    mask = M.key_padding(lengths)
    keep = mask.to_dense(7, 7)
    gout = torch.randn(3, 4, 7, 8, generator=torch.Generator().manual_seed(1))
    assert select_backend(q, k, mask) == "math"
    grads = {}
    for backend in ("auto", "sdpa"):
        out = attend(q, k, v, mask, backend=backend)
        grads[backend] = (out, *torch.autograd.grad(out, (q, k, v), gout))
    ref = _reference(q, k, v, keep)
    ref_grads = (ref, *torch.autograd.grad(ref, (q, k, v), gout.double()))
    for got, want, other in zip(grads["auto"], ref_grads, grads["sdpa"], strict=True):
        torch.testing.assert_close(got, want.float(), atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(got, other, atol=1e-5, rtol=1e-4)
    if 0 in lengths:  # a batch row with no allowed key: zeros, and zero gradients
        assert grads["auto"][0][1].abs().max() == 0
        assert grads["auto"][2][1].abs().max() == 0


def test_bfloat16_gradients_stay_close_to_the_float64_reference(any_size):
    q, k, v = _qkv(lk=24, lq=24, dtype=torch.bfloat16)
    assert select_backend(q, k) == "math"
    out = attend(q, k, v)
    grads = torch.autograd.grad(out.float().square().sum(), (q, k, v))
    ref = _reference(q, k, v, None)
    ref_grads = torch.autograd.grad(ref.square().sum(), (q, k, v))
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), ref.float(), atol=2e-2, rtol=2e-2)
    for got, want in zip(grads, ref_grads, strict=True):
        assert got.dtype == torch.bfloat16
        torch.testing.assert_close(got.float(), want.float(), atol=5e-2, rtol=5e-2)


def test_non_contiguous_odd_and_empty_inputs(any_size):
    g = torch.Generator().manual_seed(2)
    # (batch, len, heads, d) storage transposed to (batch, heads, len, d), as a layer makes it
    base = torch.randn(2, 13, 3, 8, generator=g)
    q = base.transpose(1, 2).requires_grad_()
    k = torch.randn(2, 3, 8, 13, generator=g).transpose(-1, -2).requires_grad_()
    v = torch.randn(2, 3, 13, 8, generator=g).requires_grad_()
    assert not q.is_contiguous() and not k.is_contiguous()
    out = attend(q, k, v)
    ref = _reference(q, k, v, None)
    torch.testing.assert_close(out, ref.float(), atol=1e-5, rtol=1e-4)
    gq, gk, gv = torch.autograd.grad(out.sum(), (q, k, v))
    rq, rk, rv = torch.autograd.grad(ref.sum(), (q, k, v))
    for got, want in ((gq, rq), (gk, rk), (gv, rv)):
        torch.testing.assert_close(got, want.float(), atol=1e-5, rtol=1e-4)
    q0, k0, v0 = _qkv(b=0)
    out0 = attend(q0, k0, v0)
    assert out0.shape == (0, 4, 7, 8)
    out0.sum().backward()
    assert q0.grad.shape == q0.shape


def test_multi_head_attention_trains_the_same_on_either_kernel(monkeypatch, any_size):
    import headwise.attention.mha as mha

    calls = []
    kernel = mha.math_attention
    monkeypatch.setattr(mha, "math_attention", lambda *a: calls.append(1) or kernel(*a))
    torch.manual_seed(0)
    auto = MultiHeadAttention(32, 4, dropout=0.0).train()
    sdpa = MultiHeadAttention(32, 4, dropout=0.0, backend="sdpa").train()
    sdpa.load_state_dict(auto.state_dict())
    x = torch.randn(5, 11, 32)
    mask = M.key_padding([11, 4, 9, 1, 11])
    losses, grads = [], []
    for layer in (auto, sdpa):
        loss = layer(x, mask=mask).square().mean()
        losses.append(loss)
        grads.append(torch.autograd.grad(loss, list(layer.parameters())))
    assert calls == [1]  # auto's direct path took the math kernel, "sdpa" did not
    torch.testing.assert_close(losses[0], losses[1], atol=1e-6, rtol=1e-5)
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-4)
