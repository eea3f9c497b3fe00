"""Every backend x mask kind x dtype against a float64 reference (FlashAttention's rule).

The rule: a backend's max error against the float64 math path is at most twice the error
of the math path run in the same low precision (plus a floor of a few ulps, for cases
where the math path happens to be exact).
"""

from __future__ import annotations

import pytest
import torch

from headwise.attention import ALiBi, attend
from headwise.attention import masks as M

B, H, KVH, D = 2, 4, 2, 16
FLOOR = {torch.float64: 1e-12, torch.float32: 2e-6, torch.bfloat16: 2e-2}


def _case(name: str):
    """(pattern-or-tensor, q_len, k_len, bias) for a mask kind."""
    g = torch.Generator().manual_seed(7)
    if name == "none":
        return None, 100, 100, None
    if name == "dense":
        return torch.rand(B, H, 100, 100, generator=g) > 0.3, 100, 100, None
    if name == "causal":
        return M.causal(), 100, 100, None
    if name == "causal_bottom_right":
        return M.causal("bottom_right"), 37, 100, None
    if name == "causal_top_left_short":
        return M.causal("top_left"), 37, 100, None
    if name == "key_padding":
        return M.key_padding([61, 100]), 100, 100, None
    if name == "sliding_window":
        return M.sliding_window(9), 100, 100, None
    if name == "window_global_padding":
        return (M.sliding_window(5) | M.global_tokens([0, 50])) & M.key_padding([90, 70]), \
            100, 100, None
    if name == "bigbird":
        return M.bigbird(16, 2, seed=3), 100, 100, None
    if name == "documents":
        return M.documents([[30, 40, 20], [100]]), 100, 100, None
    if name == "alibi_causal":
        return M.causal(), 100, 100, ALiBi(H)(100, 100, dtype=torch.float64)
    raise KeyError(name)


MASKS = ["none", "dense", "causal", "causal_bottom_right", "causal_top_left_short",
         "key_padding", "sliding_window", "window_global_padding", "bigbird", "documents",
         "alibi_causal"]


def _inputs(q_len, k_len, dtype):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(B, H, q_len, D, generator=g, dtype=torch.float64)
    k = torch.randn(B, KVH, k_len, D, generator=g, dtype=torch.float64)
    v = torch.randn(B, KVH, k_len, D, generator=g, dtype=torch.float64)
    do = torch.randn(B, H, q_len, D, generator=g, dtype=torch.float64)
    return q, k, v, do


def _run(backend, q, k, v, do, mask, bias, dtype, grad=True):
    qs, ks, vs = (t.to(dtype).requires_grad_(grad) for t in (q, k, v))
    b = None if bias is None else bias.to(dtype)
    out = attend(qs, ks, vs, mask, backend=backend, bias=b)
    if not grad:
        return out.double(), ()
    grads = torch.autograd.grad(out, (qs, ks, vs), do.to(dtype))
    return out.double(), tuple(g.double() for g in grads)


def _err(a, b):
    return (a - b).abs().max().item()


@pytest.mark.usefixtures("small_tiles")
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16],
                         ids=["f64", "f32", "bf16"])
@pytest.mark.parametrize("mask_name", MASKS)
@pytest.mark.parametrize("backend", ["sdpa", "tiled"])
def test_backend_matches_float64_reference(backend, mask_name, dtype):
    mask, lq, lk, bias = _case(mask_name)
    q, k, v, do = _inputs(lq, lk, dtype)
    ref_out, ref_grads = _run("math", q, k, v, do, mask, bias, torch.float64)
    math_out, math_grads = _run("math", q, k, v, do, mask, bias, dtype)
    out, grads = _run(backend, q, k, v, do, mask, bias, dtype)
    floor = FLOOR[dtype]
    assert not torch.isnan(out).any()
    assert _err(out, ref_out) <= 2 * _err(math_out, ref_out) + floor
    for name, g, mg, rg in zip("qkv", grads, math_grads, ref_grads, strict=True):
        assert not torch.isnan(g).any(), name
        assert _err(g, rg) <= 2 * _err(mg, rg) + 2 * floor, name


@pytest.mark.parametrize("mask_name", MASKS)
def test_flex_forward_matches_reference(mask_name):
    # Compiled FlexAttention: forward only on CPU (no backward there in torch 2.13).
    mask, lq, lk, bias = _case(mask_name)
    q, k, v, do = _inputs(lq, lk, torch.float32)
    ref_out, _ = _run("math", q, k, v, do, mask, bias, torch.float64, grad=False)
    math_out, _ = _run("math", q, k, v, do, mask, bias, torch.float32, grad=False)
    with torch.no_grad():
        out, _ = _run("flex", q, k, v, do, mask, bias, torch.float32, grad=False)
    assert _err(out, ref_out) <= 2 * _err(math_out, ref_out) + FLOOR[torch.float32]


def test_flex_bfloat16():
    q, k, v, do = _inputs(100, 100, torch.bfloat16)
    ref_out, _ = _run("math", q, k, v, do, M.causal(), None, torch.float64, grad=False)
    math_out, _ = _run("math", q, k, v, do, M.causal(), None, torch.bfloat16, grad=False)
    with torch.no_grad():
        out, _ = _run("flex", q, k, v, do, M.causal(), None, torch.bfloat16, grad=False)
    assert _err(out, ref_out) <= 2 * _err(math_out, ref_out) + FLOOR[torch.bfloat16]


def test_bias_gradient_on_tiled_matches_math(small_tiles):
    q, k, v, do = _inputs(70, 70, torch.float64)
    bias = torch.randn(1, H, 70, 70, dtype=torch.float64)
    grads = {}
    for backend in ("math", "tiled", "sdpa"):
        b = bias.clone().requires_grad_()
        out = attend(q, k, v, M.causal(), backend=backend, bias=b)
        (gb,) = torch.autograd.grad(out, (b,), do)
        grads[backend] = gb
    assert _err(grads["tiled"], grads["math"]) < 1e-12
    assert _err(grads["sdpa"], grads["math"]) < 1e-12


@pytest.mark.parametrize("backend", ["math", "sdpa", "tiled", "flex"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16],
                         ids=["f64", "f32", "bf16"])
def test_fully_masked_rows_are_zero_with_zero_gradient(backend, dtype, small_tiles):
    if backend == "flex" and dtype == torch.float64:
        pytest.skip("FlexAttention on CPU has no float64")
    grad = backend != "flex"
    # row 1 has no keys at all; positions past the documents attend nothing either
    mask = M.key_padding([50, 0]) | M.documents([20, 20])
    q, k, v, do = _inputs(64, 64, dtype)
    qs, ks, vs = (t.to(dtype).requires_grad_(grad) for t in (q, k, v))
    with torch.set_grad_enabled(grad):
        out = attend(qs, ks, vs, mask, backend=backend)
    assert torch.isfinite(out).all()
    assert (out[1, :, 40:] == 0).all()
    if grad:
        gq, gk, gv = torch.autograd.grad(out, (qs, ks, vs), do.to(dtype))
        for g in (gq, gk, gv):
            assert torch.isfinite(g).all()
        assert (gq[1, :, 40:] == 0).all()


def test_sdpa_zeroes_dead_rows_where_the_fused_kernel_does_not(monkeypatch):
    """On a device whose SDPA kernel returns other values for a query with no allowed key
    (CUDA's cuDNN kernel in half precision, tests/attention/test_cuda.py), the sdpa backend
    zeroes those rows itself: simulated here with a kernel that averages v over every key,
    masked or not, on a device declared not to zero them."""
    import torch.nn.functional as F

    from headwise.attention.kernels import sdpa

    real = F.scaled_dot_product_attention

    def averaging_dead_rows(q, k, v, attn_mask=None, **kw):
        out = real(q, k, v, attn_mask=attn_mask, **kw)
        dead = ~attn_mask.any(-1, keepdim=True)
        mean = v.repeat_interleave(q.shape[1] // v.shape[1], 1).mean(-2, keepdim=True)
        return torch.where(dead, mean.expand_as(out), out)

    mask = M.key_padding([50, 0]) | M.documents([20, 20])
    q, k, v, do = _inputs(64, 64, torch.float64)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    want = attend(q, k, v, mask, backend="math")
    monkeypatch.setattr(sdpa.F, "scaled_dot_product_attention", averaging_dead_rows)
    monkeypatch.setattr(sdpa, "zeroes_dead_rows", lambda device: False)
    got = attend(q, k, v, mask, backend="sdpa")
    assert (got[1, :, 40:] == 0).all() and _err(got, want) < 1e-12
    for g, w in zip(torch.autograd.grad(got, (q, k, v), do),
                    torch.autograd.grad(want, (q, k, v), do), strict=True):
        assert _err(g, w) < 1e-12
    monkeypatch.setattr(sdpa, "zeroes_dead_rows", lambda device: True)  # what it guards
    assert not (attend(q, k, v, mask, backend="sdpa")[1, :, 40:] == 0).all()


def test_gradcheck_math_and_tiled(small_tiles, monkeypatch):
    from headwise.attention.kernels import tiled

    monkeypatch.setattr(tiled, "DEFAULT_BLOCK_Q", 4)
    monkeypatch.setattr(tiled, "DEFAULT_BLOCK_K", 3)
    g = torch.Generator().manual_seed(1)
    q = torch.randn(1, 2, 9, 4, dtype=torch.float64, generator=g, requires_grad=True)
    k = torch.randn(1, 1, 10, 4, dtype=torch.float64, generator=g, requires_grad=True)
    v = torch.randn(1, 1, 10, 5, dtype=torch.float64, generator=g, requires_grad=True)
    bias = torch.randn(1, 2, 9, 10, dtype=torch.float64, generator=g, requires_grad=True)
    mask = M.sliding_window(3, align="bottom_right") | M.global_tokens([0])
    for backend in ("math", "tiled"):
        def fn(q, k, v, bias, backend=backend):
            return attend(q, k, v, mask, backend=backend, bias=bias)

        assert torch.autograd.gradcheck(fn, (q, k, v, bias))


def test_return_weights_are_a_distribution_and_reproduce_output():
    q, k, v, _ = _inputs(20, 30, torch.float64)
    out, w = attend(q, k, v, M.causal("bottom_right"), return_weights=True)
    assert w.shape == (B, H, 20, 30)
    torch.testing.assert_close(w.sum(-1), torch.ones(B, H, 20, dtype=torch.float64))
    assert (w[..., 0, 11:] == 0).all()  # query 0 sits at key position 10
    # weights times repeated values give the output (GQA: head h uses kv head h // 2)
    v_rep = v.repeat_interleave(H // KVH, dim=1)
    torch.testing.assert_close(w @ v_rep, out)


def test_math_weights_match_explicit_softmax():
    q, k, v, _ = _inputs(12, 12, torch.float64)
    k_rep = k.repeat_interleave(H // KVH, dim=1)
    scores = q @ k_rep.transpose(-1, -2) / D**0.5
    _, w = attend(q, k, v, backend="math", return_weights=True)
    torch.testing.assert_close(w, torch.softmax(scores, -1))


def test_custom_scale_is_applied_by_every_backend():
    q, k, v, _ = _inputs(40, 40, torch.float64)
    ref = attend(q, k, v, backend="math", scale=0.05)
    for backend in ("sdpa", "tiled"):
        torch.testing.assert_close(attend(q, k, v, backend=backend, scale=0.05), ref)


def test_dropout_is_unbiased():
    torch.manual_seed(0)
    q, k, v, _ = _inputs(8, 8, torch.float64)
    exact = attend(q, k, v, backend="math")
    for backend in ("math", "sdpa"):
        runs = torch.stack([attend(q, k, v, backend=backend, dropout_p=0.3) for _ in range(400)])
        assert not torch.equal(runs[0], runs[1])
        assert _err(runs.mean(0), exact) < 0.25


def test_softmax_runs_in_float32_under_autocast():
    q, k, v, _ = _inputs(16, 16, torch.float64)
    qb, kb, vb = (t.to(torch.bfloat16) for t in (q, k, v))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, w = attend(qb, kb, vb, M.causal(), return_weights=True)
    assert w.dtype == torch.float32 and out.dtype == torch.bfloat16
    torch.testing.assert_close(w.sum(-1), torch.ones_like(w.sum(-1)), atol=1e-6, rtol=0)
