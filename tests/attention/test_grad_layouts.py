"""Gradients of every attention backend for every input and upstream-gradient layout.

A property-based sweep (hypothesis) over backend x mask kind x dtype x shape x layout of
q / k / v (contiguous, (batch, seq, heads, dim) transposed, dim-major, an offset slice of
a larger buffer, broadcast over batch or heads) x layout of the gradient that arrives
from above (``.sum()`` and ``.mean()``, which hand down expanded stride-0 gradients, a
slice or a strided slice of the output, a transposed or expanded ``grad_outputs``, a
gradient for only some outputs, or for the weights only) x which of q, k, v (and a bias)
need gradients. Every case is checked against the float64 math path with FlashAttention's
rule (as in test_kernels.py): the backend's max error against float64 is at most twice
that of the math path run in the same precision, plus a floor of a few ulps of the
reference's magnitude. Requests a backend refuses must be refused with a clear error.

``pytest tests/attention/test_grad_layouts.py --hypothesis-profile=long`` runs the long
sweep (profiles in tests/conftest.py); ``python benchmarks/hardening.py`` runs and records
it with the models' sweep (BENCHMARKS ``hardening:hypothesis``).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

import headwise.attention.kernels as kernels
from headwise.attention import attend
from headwise.attention import masks as M
from headwise.attention.kernels import blocksparse, blocksparse_cpu, tiled
from headwise.attention.linear import linear_attention, orthogonal_features
from headwise.attention.lsh import lsh_attention, shared_qk_attention

FLOOR = {torch.float64: 1e-12, torch.float32: 2e-6, torch.bfloat16: 2e-2}
BACKENDS = ["math", "sdpa", "tiled", "blocksparse", "flex", "auto"]
#: drawn more often: the kernels with their own backward (tiled, blocksparse) and the
#: dispatcher, which sends sparse patterns to blocksparse here (see ``_small_blocks``)
DRAWN_BACKENDS = BACKENDS + ["tiled", "blocksparse", "blocksparse", "auto"]
DTYPES = [torch.float64, torch.float32, torch.bfloat16]
#: layouts of q, k, v (see :func:`_make_input`)
INPUT_LAYOUTS = ["contiguous", "bshd", "dim_major", "offset_slice", "batch_expanded",
                 "head_expanded"]
#: layouts of the upstream gradient (see :func:`_loss`)
GRAD_LAYOUTS = ["sum", "mean", "slice", "strided_slice", "transposed", "bshd", "expanded",
                "scalar_expanded", "some_outputs", "one_batch_row", "weights_only",
                "out_and_weights"]
#: (heads, kv heads): one head, multi-head, grouped-query and multi-query
HEADS = [(1, 1), (2, 2), (3, 3), (4, 2), (4, 1), (6, 3)]
#: which of q, k, v need gradients: every non-empty subset
NEEDS_GRAD = [(a, b, c) for a in (True, False) for b in (True, False) for c in (True, False)
              if a or b or c]


@dataclass
class Result:
    """Output and gradients of one run (float64), and the largest upstream gradient."""

    out: torch.Tensor
    grads: list[torch.Tensor]
    d_out: float


@dataclass
class Case:
    """One drawn request (its repr is what hypothesis prints for a failing example)."""

    backend: str
    dtype: torch.dtype
    batch: int
    heads: int
    kv_heads: int
    q_len: int
    k_len: int
    head_dim: int
    v_dim: int
    mask_name: str
    mask: Any = field(repr=False)
    layouts: tuple[str, str, str]
    grad_layout: str
    needs_grad: tuple[bool, bool, bool]
    bias: str  # "none", "fixed" (no gradient) or "learned"; "_t5": stored (B, q, k, H)
    bias_full: tuple[bool, bool, bool, bool]  # per dim: full size, or 1 (broadcast)
    block: int
    tiles: tuple[int, int]
    chunk_elements: int
    seed: int


# ----------------------------------------------------------------------------- masks
@st.composite
def simple_masks(draw, batch: int, heads: int, q_len: int, k_len: int):
    """(name, mask) of one mask kind of headwise.attention.masks, sized for the case."""
    n = max(q_len, k_len)
    kind = draw(st.sampled_from(["none", "causal", "causal_bottom_right", "key_padding",
                                 "sliding_window", "window_global", "bigbird", "documents",
                                 "dense_tensor"]))
    if kind == "none":
        return kind, None
    if kind == "causal":
        return kind, M.causal()
    if kind == "causal_bottom_right":
        return kind, M.causal("bottom_right")
    if kind == "key_padding":
        lengths = draw(st.lists(st.integers(0, k_len), min_size=batch, max_size=batch))
        return f"key_padding({lengths})", M.key_padding(lengths)
    if kind == "sliding_window":
        w = draw(st.integers(1, 24))
        align = draw(st.sampled_from(["top_left", "bottom_right"]))
        return f"sliding_window({w}, {align})", M.sliding_window(w, align)
    if kind == "window_global":
        w = draw(st.integers(1, 16))
        pos = draw(st.lists(st.integers(0, min(q_len, k_len) - 1), min_size=1, max_size=3,
                            unique=True))
        return f"sliding_window({w}) | global_tokens({pos})", \
            M.sliding_window(w) | M.global_tokens(pos)
    if kind == "bigbird":
        bs, nr, seed = draw(st.integers(2, 12)), draw(st.integers(0, 2)), draw(st.integers(0, 9))
        return f"bigbird({bs}, {nr}, {seed})", M.bigbird(bs, nr, seed=seed)
    if kind == "documents":
        def docs():
            return draw(st.lists(st.integers(1, max(1, n // 2)), min_size=1, max_size=4)
                        .filter(lambda r: sum(r) <= n))
        rows = [docs() for _ in range(batch)] if draw(st.booleans()) and batch > 1 else docs()
        return f"documents({rows})", M.documents(rows)
    # a dense boolean tensor: per batch row, head, query and key, or broadcast along any
    shape = tuple(draw(st.sampled_from([1, n])) for n in (batch, heads, q_len, k_len))
    seed = draw(st.integers(0, 2**16))
    g = torch.Generator().manual_seed(seed)
    dense = torch.rand(*shape, generator=g) > draw(st.sampled_from([0.2, 0.7]))
    if shape[:2] == (1, 1) and draw(st.booleans()):
        dense = dense[0, 0]  # 2-D
    return f"dense_tensor(shape={tuple(dense.shape)}, seed={seed})", dense


@st.composite
def masks_for(draw, batch: int, heads: int, q_len: int, k_len: int):
    """A mask kind, or two combined with ``&`` / ``|`` (patterns only)."""
    name, mask = draw(simple_masks(batch, heads, q_len, k_len))
    op = draw(st.sampled_from(["", "", "&", "|"]))
    if not op or mask is None or isinstance(mask, torch.Tensor):
        return name, mask
    name2, mask2 = draw(simple_masks(batch, heads, q_len, k_len))
    if mask2 is None or isinstance(mask2, torch.Tensor):
        return name, mask
    combined = (mask & mask2) if op == "&" else (mask | mask2)
    return f"({name}) {op} ({name2})", combined


# ----------------------------------------------------------------------------- cases
@st.composite
def cases(draw) -> Case:
    backend = draw(st.sampled_from(DRAWN_BACKENDS))
    dtype = draw(st.sampled_from(DTYPES))
    batch = draw(st.integers(1, 3))
    heads, kv_heads = draw(st.sampled_from(HEADS))
    q_len = draw(st.integers(1, 70))
    k_len = draw(st.one_of(st.just(q_len), st.integers(1, 70)))
    head_dim = draw(st.sampled_from([1, 4, 8, 16]))
    v_dim = draw(st.sampled_from([head_dim, head_dim, 3, 8]))
    mask_name, mask = draw(masks_for(batch, heads, q_len, k_len))
    layouts = tuple(draw(st.sampled_from(INPUT_LAYOUTS)) for _ in range(3))
    needs = draw(st.sampled_from(NEEDS_GRAD))
    return Case(backend, dtype, batch, heads, kv_heads, q_len, k_len, head_dim, v_dim,
                mask_name, mask, layouts, draw(st.sampled_from(GRAD_LAYOUTS)), needs,
                draw(st.sampled_from(["none", "none", "fixed", "learned", "learned_t5",
                                      "fixed_t5"])),
                draw(st.tuples(*(st.booleans() for _ in range(4)))),
                draw(st.sampled_from([4, 8, 16])),
                draw(st.sampled_from([(8, 8), (16, 8), (7, 12), (256, 512)])),
                draw(st.sampled_from([64, 512, 4096, blocksparse_cpu.CHUNK_ELEMENTS])),
                draw(st.integers(0, 2**16)))


# ----------------------------------------------------------------------------- layouts
def _make_input(values: torch.Tensor, layout: str, dtype: torch.dtype):
    """``(leaf, view)``: a leaf tensor in ``dtype`` and the function that turns it into the
    (batch, heads, seq, dim) input with ``values`` in the given memory layout."""
    b, h, n, d = values.shape
    if layout == "contiguous":
        return values.to(dtype), lambda t: t
    if layout == "bshd":  # the (batch, seq, heads, dim) projection output, transposed
        return values.transpose(1, 2).contiguous().to(dtype), lambda t: t.transpose(1, 2)
    if layout == "dim_major":  # last-dim stride != 1
        return values.transpose(2, 3).contiguous().to(dtype), lambda t: t.transpose(2, 3)
    if layout == "offset_slice":  # storage offset, row stride != dim
        big = torch.zeros(b, h, n + 3, d + 2, dtype=torch.float64)
        big[:, :, 2:2 + n, 1:1 + d] = values
        return big.to(dtype), lambda t: t[:, :, 2:2 + n, 1:1 + d]
    if layout == "batch_expanded":  # stride 0 over batch
        return values[:1].to(dtype), lambda t: t.expand(b, -1, -1, -1)
    if layout == "head_expanded":  # stride 0 over heads
        return values[:, :1].to(dtype), lambda t: t.expand(-1, h, -1, -1)
    raise KeyError(layout)


def _values(shape: tuple[int, ...], layout: str, g: torch.Generator) -> torch.Tensor:
    """float64 values of an input, equal along the dims its layout broadcasts."""
    x = torch.randn(*shape, generator=g, dtype=torch.float64)
    if layout == "batch_expanded":
        x = x[:1].expand(shape).clone()
    if layout == "head_expanded":
        x = x[:, :1].expand(shape).clone()
    return x


def _loss(layout: str, out: torch.Tensor, weights: torch.Tensor | None, g: torch.Generator):
    """``(outputs, grad_outputs)`` for ``torch.autograd.grad``: the upstream gradient in the
    given layout (built from ``g`` so that every precision gets the same one)."""
    b, h, lq, dv = out.shape
    dt = out.dtype

    def rand(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64).to(dt)

    if layout == "sum":
        return [out.sum()], None
    if layout == "mean":
        return [out.mean()], None
    if layout == "slice":
        return [out[:, :, lq // 3: lq // 3 + 5].sum()], None
    if layout == "strided_slice":
        return [(out[:, :, ::2, ::2] * 1.5).sum()], None
    if layout == "transposed":
        return [out], [rand(b, h, dv, lq).transpose(-1, -2)]
    if layout == "bshd":
        return [out], [rand(b, lq, h, dv).transpose(1, 2)]
    if layout == "expanded":
        return [out], [rand(1, h, 1, dv).expand(b, h, lq, dv)]
    if layout == "scalar_expanded":
        return [out], [torch.tensor(0.75, dtype=dt).expand(b, h, lq, dv)]
    if layout == "some_outputs":  # two slices: only head 0 and the last query row
        return [out[:, :1].sum() + (out[:, :, -1:] * 2).sum()], None
    if layout == "one_batch_row":
        return [out[-1]], [rand(h, lq, dv)]
    if layout == "weights_only":
        return [weights], [rand(b, h, lq, weights.shape[-1])]
    if layout == "out_and_weights":
        return [out, weights[..., :1]], [rand(b, h, lq, dv), rand(b, h, lq, 1)]
    raise KeyError(layout)


def _wants_weights(case: Case) -> bool:
    return case.grad_layout in ("weights_only", "out_and_weights")


def _run(case: Case, dtype: torch.dtype, backend: str, *, contiguous: bool) -> Result:
    """Output and gradients (float64) of the case at ``dtype`` on ``backend``; the inputs
    are made contiguous first when ``contiguous`` (the reference and math paths)."""
    g = torch.Generator().manual_seed(case.seed)
    shapes = [(case.batch, case.heads, case.q_len, case.head_dim),
              (case.batch, case.kv_heads, case.k_len, case.head_dim),
              (case.batch, case.kv_heads, case.k_len, case.v_dim)]
    leaves, inputs = [], []
    for shape, layout, need in zip(shapes, case.layouts, case.needs_grad, strict=True):
        leaf, view = _make_input(_values(shape, layout, g), layout, case.dtype)
        leaf = leaf.to(dtype).requires_grad_(need)  # the case's rounding, then ``dtype``
        x = view(leaf)
        leaves.append(leaf)
        inputs.append(x.contiguous() if contiguous else x)
    bias = bias_leaf = None
    if case.bias != "none":
        full = (case.batch, case.heads, case.q_len, case.k_len)
        shape = [n if keep else 1 for n, keep in zip(full, case.bias_full, strict=True)]
        b64 = 0.5 * torch.randn(*shape, generator=g, dtype=torch.float64)
        if case.bias.endswith("_t5"):  # T5RelativePositionBias's permuted (heads last) view
            b64 = b64.permute(0, 2, 3, 1).contiguous()
        bias_leaf = b64.to(case.dtype).to(dtype).requires_grad_(case.bias.startswith("learned"))
        bias = bias_leaf.permute(0, 3, 1, 2) if case.bias.endswith("_t5") else bias_leaf
        if contiguous:
            bias = bias.contiguous()
    weights = None
    res = attend(*inputs, case.mask, backend=backend, bias=bias,
                 return_weights=_wants_weights(case))
    out, weights = res if _wants_weights(case) else (res, None)
    wrt = [t for t in leaves if t.requires_grad]
    if bias_leaf is not None and bias_leaf.requires_grad:
        wrt.append(bias_leaf)
    return _backward(case.grad_layout, out, weights, g, wrt)


def _backward(grad_layout: str, out: torch.Tensor, weights: torch.Tensor | None,
              g: torch.Generator, wrt: list[torch.Tensor]) -> Result:
    """The upstream gradient in ``grad_layout`` pulled back to ``wrt``."""
    outputs, grads_out = _loss(grad_layout, out, weights, g)
    if grads_out is None:
        grads_out = [None] * len(outputs)
    # the weights do not depend on v: with only v needing gradients they need none
    pairs = [(o, go) for o, go in zip(outputs, grads_out, strict=True) if o.requires_grad]
    if not pairs:
        return Result(out.detach().double(), [torch.zeros_like(t, dtype=torch.float64)
                                              for t in wrt], 0.0)
    outputs, grads_out = (list(x) for x in zip(*pairs, strict=True))
    if all(go is None for go in grads_out):
        grads_out = None
    *grads, d_out = torch.autograd.grad(outputs, [*wrt, out], grads_out, allow_unused=True)
    d_out = 0.0 if d_out is None else d_out.abs().max().item()
    grads = [torch.zeros_like(t) if gr is None else gr for t, gr in zip(wrt, grads, strict=True)]
    return Result(out.detach().double(), [x.double() for x in grads], d_out)


def _err(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item() if a.numel() else 0.0


def _amax(x: torch.Tensor) -> float:
    return x.abs().max().item() if x.numel() else 0.0


def assert_rule(got: Result, low: Result, ref: Result, dtype: torch.dtype, n_keys: int
                ) -> None:
    """FlashAttention's rule: ``got`` (the kernel in ``dtype``) is at most twice as far from
    ``ref`` (float64) as ``low`` (the reference path in ``dtype``), plus a floor of a few ulps
    of the magnitudes involved: the output's, and for gradients also the size of the terms
    that cancel in them (output x upstream gradient: attention's gradient is a difference
    of such terms, summed over the queries or the ``n_keys`` keys, so a true gradient near
    zero is computed from terms of that size)."""
    floor = FLOOR[dtype]
    assert torch.isfinite(got.out).all()
    out_floor = floor * max(1.0, _amax(ref.out))
    assert _err(got.out, ref.out) <= 2 * _err(low.out, ref.out) + out_floor, "output"
    assert len(got.grads) == len(ref.grads)
    terms = _amax(ref.out) * ref.d_out * max(ref.out.shape[-2], n_keys)
    for i, (gr, lg, rg) in enumerate(zip(got.grads, low.grads, ref.grads, strict=True)):
        assert gr.shape == rg.shape, i
        assert torch.isfinite(gr).all(), i
        scale = max(1.0, _amax(rg), terms)
        assert _err(gr, rg) <= 2 * _err(lg, rg) + 2 * floor * scale, f"gradient {i}"


def _expected_refusal(case: Case) -> tuple[type[Exception], str] | None:
    """The error a backend must raise for a request it cannot serve, or None."""
    if _wants_weights(case) and case.backend not in ("math", "auto"):
        return ValueError, "return_weights=True needs backend='math'"
    if case.backend == "flex":  # no backward on CPU (torch 2.13); every case needs one
        return RuntimeError, "FlexAttention has no backward pass on cpu"
    return None


@contextlib.contextmanager
def _small_blocks(case: Case):
    """Small blocks and tiles so that short sequences cross many of them; ``auto``
    considers the sparse kernel at every length."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(blocksparse, "DEFAULT_BLOCK", case.block)
        mp.setattr(tiled, "DEFAULT_BLOCK_Q", case.tiles[0])
        mp.setattr(tiled, "DEFAULT_BLOCK_K", case.tiles[1])
        mp.setattr(blocksparse_cpu, "CHUNK_ELEMENTS", case.chunk_elements)
        mp.setattr(kernels, "SPARSE_MIN_LEN", 1)
        yield


def check_case(case: Case) -> None:
    """Run one case on its backend and hold it to the rule (or to its refusal)."""
    refusal = _expected_refusal(case)
    with _small_blocks(case):
        if refusal is not None:
            with pytest.raises(refusal[0], match=refusal[1]):
                _run(case, case.dtype, case.backend, contiguous=False)
            return
        ref = _run(case, torch.float64, "math", contiguous=True)
        low = _run(case, case.dtype, "math", contiguous=True)
        got = _run(case, case.dtype, case.backend, contiguous=False)
    assert_rule(got, low, ref, case.dtype, case.k_len)


_WINDOW = M.sliding_window(20)


@given(case=cases())
# the outside report, scaled down: .sum() on a band hands the fused kernel's strided
# views an expanded (stride 0) gradient
@example(case=Case("blocksparse", torch.float32, 1, 4, 4, 130, 130, 8, 8, "sliding_window(20)",
                   _WINDOW, ("contiguous",) * 3, "sum", (True, True, True), "none",
                   (False, True, True, True), 16, (16, 8), 4096, 0))
# batch = heads = 1 and a dim-major q: a viewable but not row-major input
@example(case=Case("blocksparse", torch.float64, 1, 1, 1, 130, 130, 8, 8, "sliding_window(20)",
                   _WINDOW, ("dim_major", "bshd", "offset_slice"), "transposed",
                   (True, False, True), "fixed", (False, True, True, True), 16, (16, 8), 512,
                   1))
# a padding mask broadcast over queries, (batch, 1, 1, k_len), as the encoder passes it,
# and a bias broadcast over keys: both sliced per tile
@example(case=Case("tiled", torch.float32, 2, 2, 2, 9, 9, 4, 4, "dense_tensor(2, 1, 1, 9)",
                   torch.arange(9)[None, None, None, :] < torch.tensor([9, 4]).view(2, 1, 1, 1),
                   ("contiguous",) * 3, "sum", (True, True, True), "learned",
                   (False, True, True, False), 4, (4, 4), 4096, 2))
# the same padding mask on block-sparse (its blocks crashed on a view of the broadcast mask)
@example(case=Case("blocksparse", torch.float32, 2, 2, 2, 9, 9, 4, 4, "dense_tensor(2, 1, 1, 9)",
                   torch.arange(9)[None, None, None, :] < torch.tensor([9, 4]).view(2, 1, 1, 1),
                   ("contiguous",) * 3, "sum", (True, True, True), "none",
                   (False, True, True, False), 4, (4, 4), 4096, 2))
def test_attend_gradients_match_float64_reference(case: Case) -> None:
    check_case(case)


# ----------------------------------------------------------------------------- regressions
def test_reported_sum_backward_on_blocksparse_window() -> None:
    # the outside report: .sum() hands the kernel an expanded (stride 0) gradient, which
    # the strided views of its backward read as if it were contiguous
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 8, 2048, 64, generator=g).requires_grad_() for _ in range(3))
    out = attend(q, k, v, mask=M.sliding_window(256), backend="blocksparse")
    out.sum().backward()
    # the same gradient, materialised contiguously, gives the same result exactly
    expect = torch.autograd.grad(attend(q, k, v, M.sliding_window(256), backend="blocksparse"),
                                 (q, k, v), torch.ones(1, 8, 2048, 64))
    for got, want in zip((q.grad, k.grad, v.grad), expect, strict=True):
        assert torch.equal(got, want)


def test_blocksparse_reads_viewable_non_contiguous_inputs_correctly(monkeypatch) -> None:
    # batch = heads = 1 and a dim-major q: reshape(-1, d) of it is a view, but not a
    # row-major one; the kernel's strided views used to read the wrong elements silently
    monkeypatch.setattr(blocksparse, "DEFAULT_BLOCK", 16)
    g = torch.Generator().manual_seed(1)
    q = torch.randn(1, 1, 8, 130, generator=g, dtype=torch.float64).transpose(2, 3)
    k, v = (torch.randn(1, 1, 130, 8, generator=g, dtype=torch.float64) for _ in range(2))
    assert q.reshape(-1, 8)._base is not None  # a view, with strides (1, 130)
    mask = M.sliding_window(20)
    torch.testing.assert_close(attend(q, k, v, mask, backend="blocksparse"),
                               attend(q, k, v, mask, backend="math"), atol=1e-12, rtol=0)


@pytest.mark.parametrize("backend", ["blocksparse", "tiled"])
def test_in_place_change_of_a_custom_kernel_output_is_refused(backend) -> None:
    # their backward reads the output; an in-place change would silently corrupt it
    q, k, v = (torch.randn(1, 2, 40, 8, requires_grad=True) for _ in range(3))
    out = attend(q, k, v, M.sliding_window(5), backend=backend)
    with pytest.raises(RuntimeError, match="modified inplace"):
        out.mul_(2.0)


# ----------------------------------------------------------------------------- linear
def _phi_elu(x: torch.Tensor) -> torch.Tensor:
    return torch.where(x > 0, x + 1.0, torch.exp(x))


def _linear_reference(q, k, v, feature_map: str, causal: bool, eps: float = 1e-6):
    """Quadratic form of linear attention: (phi(q) phi(k)^T [masked]) v / row sums."""
    h, hk = q.shape[1], k.shape[1]
    k, v = k.repeat_interleave(h // hk, 1), v.repeat_interleave(h // hk, 1)
    if feature_map == "elu":
        fq, fk = _phi_elu(q), _phi_elu(k)
    else:  # FAVOR+ with the kernel's projection; stabilisers per query row / per key head
        d = q.shape[-1]
        w = orthogonal_features(max(d, round(d * math.log(d))), d, 0, dtype=q.dtype)

        def proj(x):
            xs = x * d ** -0.25
            return xs @ w.T - 0.5 * (xs * xs).sum(-1, keepdim=True)

        pq, pk = proj(q), proj(k)
        fq = torch.exp(pq - pq.amax(-1, keepdim=True).detach()) / math.sqrt(w.shape[0])
        fk = torch.exp(pk - pk.amax((-1, -2), keepdim=True).detach()) / math.sqrt(w.shape[0])
    a = fq @ fk.transpose(-1, -2)
    if causal:
        a = a.tril()
    return (a @ v) / a.sum(-1, keepdim=True).clamp_min(eps)


@st.composite
def linear_cases(draw):
    feature_map = draw(st.sampled_from(["elu", "favor"]))
    causal = feature_map == "elu" and draw(st.booleans())
    heads, kv_heads = draw(st.sampled_from(HEADS))
    n = draw(st.integers(1, 60))
    return dict(feature_map=feature_map, causal=causal,
                dtype=draw(st.sampled_from(DTYPES)), batch=draw(st.integers(1, 2)),
                heads=heads, kv_heads=kv_heads, q_len=n,
                k_len=n if causal else draw(st.integers(1, 60)),
                head_dim=draw(st.sampled_from([2, 4, 8])), v_dim=draw(st.sampled_from([3, 8])),
                layouts=tuple(draw(st.sampled_from(INPUT_LAYOUTS)) for _ in range(3)),
                grad_layout=draw(st.sampled_from(GRAD_LAYOUTS[:10])),
                needs=draw(st.sampled_from(NEEDS_GRAD)),
                block=draw(st.sampled_from([8, 16, 1024])), chunk=draw(st.sampled_from([3, 8, 64])),
                seed=draw(st.integers(0, 2**16)))


def _run_linear(c: dict, dtype: torch.dtype, fn) -> Result:
    g = torch.Generator().manual_seed(c["seed"])
    shapes = [(c["batch"], c["heads"], c["q_len"], c["head_dim"]),
              (c["batch"], c["kv_heads"], c["k_len"], c["head_dim"]),
              (c["batch"], c["kv_heads"], c["k_len"], c["v_dim"])]
    leaves, inputs = [], []
    for shape, layout, need in zip(shapes, c["layouts"], c["needs"], strict=True):
        leaf, view = _make_input(_values(shape, layout, g), layout, c["dtype"])
        leaf = leaf.to(dtype).requires_grad_(need)
        leaves.append(leaf)
        inputs.append(view(leaf))
    return _backward(c["grad_layout"], fn(*inputs), None, g,
                     [t for t in leaves if t.requires_grad])


@given(c=linear_cases())
def test_linear_attention_gradients_match_float64_reference(c: dict) -> None:
    def kernel(q, k, v):
        return linear_attention(q, k, v, c["feature_map"], c["causal"], chunk_size=c["chunk"])

    def reference(q, k, v):
        return _linear_reference(q.contiguous(), k.contiguous(), v.contiguous(),
                                 c["feature_map"], c["causal"])

    with pytest.MonkeyPatch.context() as mp:
        import headwise.attention.linear as linear

        mp.setattr(linear, "BLOCK_SIZE", c["block"])
        mp.setattr(linear, "CAUSAL_BLOCK_SIZE", c["block"])
        ref = _run_linear(c, torch.float64, reference)
        low = _run_linear(c, c["dtype"], reference)
        got = _run_linear(c, c["dtype"], kernel)
    assert_rule(got, low, ref, c["dtype"], c["k_len"])


# ----------------------------------------------------------------------------- LSH
@st.composite
def lsh_cases(draw):
    n = draw(st.integers(1, 40))
    batch = draw(st.integers(1, 2))
    dense = draw(st.booleans())  # one chunk over the sequence: exactly dense attention
    dtype = draw(st.sampled_from(DTYPES)) if dense else torch.float64
    padding = draw(st.none() | st.lists(st.integers(0, n), min_size=batch, max_size=batch))
    return dict(n=n, batch=batch, heads=draw(st.integers(1, 3)), dim=draw(st.sampled_from([2, 8])),
                v_dim=draw(st.sampled_from([3, 8])), dtype=dtype, dense=dense,
                chunk=n if dense else draw(st.integers(1, max(1, n - 1))),
                hashes=draw(st.integers(1, 3)), buckets=draw(st.sampled_from([2, 4, 8])),
                causal=draw(st.booleans()), padding=padding,
                layouts=tuple(draw(st.sampled_from(INPUT_LAYOUTS)) for _ in range(2)),
                grad_layout=draw(st.sampled_from(GRAD_LAYOUTS[:10])),
                needs=draw(st.sampled_from([(True, True), (True, False), (False, True)])),
                seed=draw(st.integers(0, 2**16)))


def _run_lsh(c: dict, dtype: torch.dtype, fn, contiguous: bool) -> Result:
    g = torch.Generator().manual_seed(c["seed"])
    shapes = [(c["batch"], c["heads"], c["n"], c["dim"]),
              (c["batch"], c["heads"], c["n"], c["v_dim"])]
    leaves, inputs = [], []
    for shape, layout, need in zip(shapes, c["layouts"], c["needs"], strict=True):
        leaf, view = _make_input(_values(shape, layout, g), layout, c["dtype"])
        leaf = leaf.to(dtype).requires_grad_(need)
        leaves.append(leaf)
        inputs.append(view(leaf).contiguous() if contiguous else view(leaf))
    keep = None
    if c["padding"] is not None:
        keep = torch.arange(c["n"])[None, :] < torch.tensor(c["padding"])[:, None]
    return _backward(c["grad_layout"], fn(*inputs, keep), None, g,
                     [t for t in leaves if t.requires_grad])


@given(c=lsh_cases())
# float32, three hash rounds, causal: query 0 sees only itself, its rounds' log-sum-exp sits
# near SELF_MASK_VALUE, and weighing the rounds by exp(lse - logsumexp) lost 0.2 % of it
@example(c=dict(n=5, batch=1, heads=1, dim=8, v_dim=8, dtype=torch.float32, dense=True, chunk=5,
                hashes=3, buckets=4, causal=True, padding=None,
                layouts=("contiguous", "contiguous"), grad_layout="sum", needs=(True, True),
                seed=0))
def test_lsh_attention_gradients_match_float64_reference(c: dict) -> None:
    def kernel(qk, v, keep):
        return lsh_attention(qk, v, c["buckets"], c["hashes"], c["chunk"], c["causal"],
                             seed=3, mask=keep)

    def dense(qk, v, keep):
        return shared_qk_attention(qk, v, c["causal"], mask=keep)

    # one chunk: dense shared-QK attention is the reference; several chunks (float64):
    # the same hashing on contiguous inputs is (bucketing depends on the values only)
    reference = dense if c["dense"] else kernel
    ref = _run_lsh(c, torch.float64, reference, contiguous=True)
    low = _run_lsh(c, c["dtype"], reference, contiguous=True)
    got = _run_lsh(c, c["dtype"], kernel, contiguous=False)
    assert_rule(got, low, ref, c["dtype"], c["n"])
