"""The block-sparse kernel against the dense masked float64 reference (forward and gradients).

Agreement follows FlashAttention's rule (see test_kernels.py): the kernel's max error
against float64 math is at most twice that of the math path in the same precision.
"""

from __future__ import annotations

import pytest
import torch

from headwise.attention import ALiBi, attend, select_backend
from headwise.attention import masks as M
from headwise.attention.kernels import blocksparse
from headwise.attention.kernels.blocksparse import block_plan, blocksparse_attention, split_point

B, H, KVH, D = 2, 4, 2, 16
FLOOR = {torch.float64: 1e-12, torch.float32: 2e-6}


@pytest.fixture
def block64(monkeypatch):
    """Blocks of 64, so lengths like 301 end in a partial block."""
    monkeypatch.setattr(blocksparse, "DEFAULT_BLOCK", 64)


def _case(name: str):
    """(mask, q_len, k_len, bias) of a named case."""
    g = torch.Generator().manual_seed(5)
    if name == "window_lt_block":
        return M.sliding_window(5), 301, 301, None
    if name == "window_gt_block":
        return M.sliding_window(100), 301, 301, None
    if name == "window_global_both_ends":
        return M.sliding_window(20) | M.global_tokens([0, 1, 299, 300]), 301, 301, None
    if name == "bigbird_same_block":
        return M.bigbird(64, 1, seed=3), 301, 301, None
    if name == "bigbird_small_block":
        return M.bigbird(16, 2, seed=4), 301, 301, None
    if name == "window_global_padding":
        pattern = (M.sliding_window(30) | M.global_tokens([0, 299])) & M.key_padding([250, 301])
        return pattern, 301, 301, None
    if name == "causal_window":
        return M.causal() & M.sliding_window(50), 301, 301, None
    if name == "fully_masked_rows":
        return M.sliding_window(20) & M.key_padding([200, 0]), 301, 301, None
    if name == "bottom_right_cache":
        return M.sliding_window(30, align="bottom_right"), 77, 301, None
    if name == "dense_tensor":
        idx = torch.arange(301)
        band = (idx[:, None] - idx[None, :]).abs() < 40
        return band & (torch.rand(B, H, 301, 301, generator=g) > 0.2), 301, 301, None
    if name == "no_mask":
        return None, 150, 150, None
    if name == "alibi_window":
        return M.sliding_window(70), 301, 301, ALiBi(H)(301, 301, dtype=torch.float64)
    raise KeyError(name)


CASES = ["window_lt_block", "window_gt_block", "window_global_both_ends", "bigbird_same_block",
         "bigbird_small_block", "window_global_padding", "causal_window", "fully_masked_rows",
         "bottom_right_cache", "dense_tensor", "no_mask", "alibi_window"]


def _inputs(q_len: int, k_len: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, q_len, D, generator=g, dtype=torch.float64)
    k = torch.randn(B, KVH, k_len, D, generator=g, dtype=torch.float64)
    v = torch.randn(B, KVH, k_len, D, generator=g, dtype=torch.float64)
    do = torch.randn(B, H, q_len, D, generator=g, dtype=torch.float64)
    return q, k, v, do


def _run(backend, q, k, v, do, mask, bias, dtype):
    qs, ks, vs = (t.to(dtype).requires_grad_() for t in (q, k, v))
    out = attend(qs, ks, vs, mask, backend=backend, bias=None if bias is None else bias.to(dtype))
    grads = torch.autograd.grad(out, (qs, ks, vs), do.to(dtype))
    return out.double(), tuple(g.double() for g in grads)


def _err(a, b):
    return (a - b).abs().max().item()


@pytest.mark.usefixtures("block64")
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", CASES)
def test_matches_float64_dense_reference(name, dtype):
    mask, lq, lk, bias = _case(name)
    q, k, v, do = _inputs(lq, lk)
    ref_out, ref_grads = _run("math", q, k, v, do, mask, bias, torch.float64)
    math_out, math_grads = _run("math", q, k, v, do, mask, bias, dtype)
    out, grads = _run("blocksparse", q, k, v, do, mask, bias, dtype)
    floor = FLOOR[dtype]
    assert torch.isfinite(out).all()
    assert _err(out, ref_out) <= 2 * _err(math_out, ref_out) + floor
    for name_, g, mg, rg in zip("qkv", grads, math_grads, ref_grads, strict=True):
        assert torch.isfinite(g).all(), name_
        assert _err(g, rg) <= 2 * _err(mg, rg) + 2 * floor, name_


def test_long_odd_length_with_default_block():
    # 1000 = 7 full blocks of 128 and a partial one; global tokens at both ends
    mask = M.sliding_window(150) | M.global_tokens([0, 999])
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 2, 1000, 8, generator=g, dtype=torch.float64) for _ in range(3))
    torch.testing.assert_close(attend(q, k, v, mask, backend="blocksparse"),
                               attend(q, k, v, mask, backend="math"), atol=1e-12, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_fully_masked_rows_are_zero_with_zero_gradient(dtype, block64):
    mask, lq, lk, _ = _case("fully_masked_rows")
    q, k, v, do = _inputs(lq, lk)
    qs, ks, vs = (t.to(dtype).requires_grad_() for t in (q, k, v))
    out = attend(qs, ks, vs, mask, backend="blocksparse")
    assert (out[1] == 0).all() and (out[0, :, 220:] == 0).all()
    assert (out[0, :, :200].abs().sum(-1) > 0).all()
    gq, gk, gv = torch.autograd.grad(out, (qs, ks, vs), do.to(dtype))
    assert (gq[1] == 0).all() and (gq[0, :, 220:] == 0).all()
    assert (gk[1] == 0).all() and (gv[1] == 0).all()
    assert (gk[0, :, 200:] == 0).all()  # padding keys get no gradient


def test_gradcheck_tiny(monkeypatch):
    monkeypatch.setattr(blocksparse, "DEFAULT_BLOCK", 4)
    g = torch.Generator().manual_seed(1)
    q = torch.randn(1, 2, 10, 4, dtype=torch.float64, generator=g, requires_grad=True)
    k = torch.randn(1, 1, 10, 4, dtype=torch.float64, generator=g, requires_grad=True)
    v = torch.randn(1, 1, 10, 3, dtype=torch.float64, generator=g, requires_grad=True)
    bias = torch.randn(1, 1, 10, 10, dtype=torch.float64, generator=g, requires_grad=True)
    mask = (M.sliding_window(2) | M.global_tokens([0, 9])) & M.key_padding([8])

    def fn(q, k, v, bias):
        return attend(q, k, v, mask, backend="blocksparse", bias=bias)

    assert torch.autograd.gradcheck(fn, (q, k, v, bias))


def test_bias_gradient_matches_math(block64):
    q, k, v, do = _inputs(150, 150)
    bias = torch.randn(1, H, 150, 150, dtype=torch.float64)
    mask = M.sliding_window(40) | M.global_tokens([149])
    grads = {}
    for backend in ("math", "blocksparse"):
        b = bias.clone().requires_grad_()
        (grads[backend],) = torch.autograd.grad(attend(q, k, v, mask, backend=backend, bias=b),
                                                (b,), do)
    assert _err(grads["blocksparse"], grads["math"]) < 1e-12


def test_plan_is_linear_in_length_and_global_rows_are_split_off():
    window = M.sliding_window(256)
    t1, t2 = (block_plan(window, n, n).computed_tiles() for n in (2048, 4096))
    assert t2 == 2 * t1  # O(n * window), not O(n^2)
    n = 4096
    glob = M.sliding_window(256) | M.global_tokens([0, n - 1])
    plan = block_plan(glob, n, n)
    widths = sorted(g.k_blocks.shape for g in plan.groups)
    assert widths == [(2, 32), (30, 7)]  # two global blocks see all 32; the rest 5 + 2
    assert plan.density() < 0.3


def test_split_point():
    assert split_point([3] * 10) == 3
    assert split_point([2] + [3] * 8 + [2]) == 3  # edges too few to be worth a second call
    assert split_point([16] + [4] * 30 + [16]) == 4
    assert split_point([]) == 0


def test_plan_made_under_inference_mode_serves_training():
    mask = M.sliding_window(10) | M.global_tokens([0])
    q, k, v, do = _inputs(200, 200)
    with torch.inference_mode():
        attend(q, k, v, mask, backend="blocksparse")
    qs = q.clone().requires_grad_()
    (g,) = torch.autograd.grad(attend(qs, k, v, mask, backend="blocksparse"), (qs,), do)
    assert torch.isfinite(g).all()


def test_dropout_is_unbiased():
    torch.manual_seed(0)
    q, k, v, _ = _inputs(40, 40)
    mask = M.sliding_window(8)
    exact = attend(q, k, v, mask, backend="math")
    runs = torch.stack([blocksparse_attention(q, k, v, mask, None, D**-0.5, 0.3, block=16)
                        for _ in range(200)])
    assert not torch.equal(runs[0], runs[1])
    assert _err(runs.mean(0), exact) < 0.3


def test_bad_block_size():
    q, k, v, _ = _inputs(10, 10)
    with pytest.raises(ValueError, match="block must be a positive int"):
        blocksparse_attention(q, k, v, M.sliding_window(3), None, 1.0, block=0)


def test_dispatcher_sends_long_sparse_patterns_here():
    long_q = torch.randn(1, 2, 2048, 8)
    for pattern in (M.sliding_window(128), M.sliding_window(128) | M.global_tokens([0, 2047]),
                    M.bigbird(128, 2), M.sliding_window(256) & M.causal()):
        assert select_backend(long_q, long_q, pattern) == "blocksparse"
    # with dropout too: the kernel honours it (SDPA's dropout inside each block)
    assert select_backend(long_q, long_q, M.sliding_window(128), dropout_p=0.1) == "blocksparse"
    assert select_backend(long_q, long_q, M.causal()) == "sdpa"
    assert select_backend(long_q, long_q, M.sliding_window(1500)) == "sdpa"  # not sparse
    # from SPARSE_MIN_LEN on; a narrow window at 512 computes 12 of the 16 tiles
    at_min = torch.randn(1, 2, 512, 8)
    assert select_backend(at_min, at_min, M.sliding_window(16)) == "blocksparse"
    assert select_backend(at_min, at_min, M.sliding_window(192)) == "sdpa"  # every tile
    short = torch.randn(1, 2, 256, 8)
    assert select_backend(short, short, M.sliding_window(16)) == "sdpa"


def test_dispatcher_sparse_backend_table(monkeypatch):
    from headwise.attention import kernels

    long_q = torch.randn(1, 2, 2048, 8)
    monkeypatch.setattr(kernels, "SPARSE_BACKEND", {"cpu": "flex"})  # as CUDA is configured
    assert select_backend(long_q, long_q, M.sliding_window(128)) == "flex"
    # requests FlexAttention cannot serve stay on the block-sparse kernel
    assert select_backend(long_q, long_q, M.sliding_window(128), dropout_p=0.1) == "blocksparse"
    long64 = long_q.double()
    assert select_backend(long64, long64, M.sliding_window(128)) == "blocksparse"


@pytest.mark.usefixtures("block64")
@pytest.mark.parametrize("name", ["window_gt_block", "window_global_both_ends", "alibi_window",
                                  "fully_masked_rows", "bottom_right_cache", "causal_window"])
def test_equal_heads_take_keys_as_strided_views(name):
    # H == KVH: the fused CPU path reads queries, keys and values of banded groups as views
    mask, lq, lk, bias = _case(name)
    g = torch.Generator().manual_seed(3)
    q, k, v, do = (torch.randn(B, H, n, D, generator=g, dtype=torch.float64)
                   for n in (lq, lk, lk, lq))
    ref_out, ref_grads = _run("math", q, k, v, do, mask, bias, torch.float64)
    math_out, math_grads = _run("math", q, k, v, do, mask, bias, torch.float32)
    out, grads = _run("blocksparse", q, k, v, do, mask, bias, torch.float32)
    assert _err(out, ref_out) <= 2 * _err(math_out, ref_out) + FLOOR[torch.float32]
    for g_, mg, rg in zip(grads, math_grads, ref_grads, strict=True):
        assert _err(g_, rg) <= 2 * _err(mg, rg) + 2 * FLOOR[torch.float32]


def test_band_chunks_are_strided_with_disjoint_key_ranges(monkeypatch):
    from headwise.attention.kernels import blocksparse_cpu

    monkeypatch.setattr(blocksparse_cpu, "CHUNK_ELEMENTS", 1 << 30)  # one chunk per class
    n, pattern = 2048, M.sliding_window(256)
    plan = block_plan(pattern, n, n)
    (group,) = plan.groups
    assert group.k_start is not None  # consecutive key blocks: contiguous key ranges
    q, k, v = (torch.randn(1, 2, n, 8) for _ in range(3))
    blocksparse_attention(q, k, v, pattern, None, 1.0)  # makes the chunks
    chunks = next(iter(group._chunks.values()))
    assert sorted(int(b) for c in chunks for b in c.q_pos[:, 0] // 128) == list(range(16))
    strided = [c for c in chunks if c.view is not None and c.q_pos.shape[0] > 1]
    assert strided  # the band's interior: blocks r, r + 5, ... in one call
    for c in strided:
        starts = c.k_pos[:, 0]
        assert bool((starts.diff() >= c.k_pos.shape[1]).all())  # disjoint key ranges
        assert c.mask.shape[0] == 1  # one shared mask, broadcast over the chunk's blocks


def test_fused_path_matches_the_autograd_path_bfloat16(monkeypatch, block64):
    # the fused path accumulates key and value gradients in float32
    mask, lq, lk, _ = _case("window_global_padding")
    q, k, v, do = _inputs(lq, lk)
    ref_out, ref_grads = _run("math", q, k, v, do, mask, None, torch.float64)
    math_out, math_grads = _run("math", q, k, v, do, mask, None, torch.bfloat16)
    out, grads = _run("blocksparse", q, k, v, do, mask, None, torch.bfloat16)
    assert _err(out, ref_out) <= 2 * _err(math_out, ref_out) + 2e-2
    for g_, mg, rg in zip(grads, math_grads, ref_grads, strict=True):
        assert _err(g_, rg) <= 2 * _err(mg, rg) + 4e-2


@pytest.mark.parametrize("pattern", [
    M.sliding_window(40), M.sliding_window(30, align="bottom_right"),
    M.causal() & M.sliding_window(50), M.sliding_window(20) | M.global_tokens([0, 77, 299]),
    M.bigbird(16, 2, seed=4), M.bigbird(64, 1, seed=3) & M.key_padding([250, 301]),
])
def test_candidate_tiles_cover_the_exact_layout(pattern):
    lq, lk = (77, 301) if "bottom_right" in repr(pattern) else (301, 301)
    cand = pattern.candidate_tiles(lq, lk, 32, 48)
    dense = pattern.to_dense(lq, lk)[:, 0]
    pad = torch.nn.functional.pad(dense, (0, 7 * 48 - lk, 0, -(-lq // 32) * 32 - lq))
    exact = pad.view(dense.shape[0], -1, 32, 7, 48).any(4).any(2).any(0)
    assert bool((cand | ~exact).all())  # a superset ...
    any_, all_ = pattern.block_layout(lq, lk, 32, 48)
    assert torch.equal(any_.any(0), exact)  # ... and the layout from it is exact
    if isinstance(pattern, M.SlidingWindow):
        assert torch.equal(cand, exact)  # the window's closed form is exact


def test_plan_evaluates_only_band_tiles(monkeypatch):
    calls = []
    window = M.sliding_window(256)
    orig = M.SlidingWindow.allowed

    def counting(self, b, h, q_idx, kv_idx, q_len, k_len):
        out = orig(self, b, h, q_idx, kv_idx, q_len, k_len)
        calls.append(out.numel())
        return out

    monkeypatch.setattr(M.SlidingWindow, "allowed", counting)
    block_plan(window, 8192, 8192)
    assert sum(calls) <= 8192 * 5 * 128  # O(n * window) pairs, not n^2 = 67M
