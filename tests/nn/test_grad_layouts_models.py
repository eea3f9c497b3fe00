"""Gradients of MultiHeadAttention, encoder layers and encoder models for every layout.

The layer-level counterpart of tests/attention/test_grad_layouts.py: property-based
(hypothesis) sweeps of ``MultiHeadAttention`` (self and cross attention, grouped-query
heads, RoPE, GLU fusion, the direct SDPA path and every backend, sparse patterns), of
a stack of ``EncoderLayer`` under gradient checkpointing, and of a tiny
``EncoderClassifier`` with sparse patterns and checkpointing, each for inputs in several
memory layouts and upstream gradients in several layouts. Every case is checked against
the same module in float64 on the math backend (and, where the configuration matches,
against ``torch.nn.MultiheadAttention``), with FlashAttention's rule: the error of the
module in its precision is at most twice that of the math path in the same precision,
plus a floor of a few ulps of the magnitudes involved.
"""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import headwise.attention.kernels as kernels
from headwise.attention import MultiHeadAttention
from headwise.attention import masks as M
from headwise.attention.kernels import blocksparse, blocksparse_cpu, tiled
from headwise.models import EncoderClassifier, preset
from headwise.nn import EncoderLayer, maybe_checkpoint

FLOOR = {torch.float64: 1e-12, torch.float32: 2e-6, torch.bfloat16: 2e-2}
#: a module case costs several attention cases: under the long profile (tests/conftest.py)
#: these sweeps run a quarter of its examples, under "ci" as many as it does
SWEEP = settings(max_examples=max(settings.default.max_examples // 4,
                                  min(30, settings.default.max_examples)))
#: a whole classifier costs several module cases: under "ci" half as many examples (fresh
#: draws every run cost about twice the fixed ones they replaced), under "long" the same
MODEL_SWEEP = settings(max_examples=max(settings.default.max_examples // 4,
                                        min(15, settings.default.max_examples)))
BACKENDS = ["auto", "math", "sdpa", "tiled", "blocksparse"]
#: layouts of a (batch, seq, width) input
X_LAYOUTS = ["contiguous", "seq_first", "offset_slice", "batch_expanded"]
#: layouts of the upstream gradient of a (batch, seq, width) output
GRAD_LAYOUTS = ["sum", "mean", "slice", "strided_slice", "transposed", "expanded",
                "first_token", "one_batch_row"]


@dataclass
class Result:
    """Output, input gradients and parameter gradients (float64) of one run."""

    out: torch.Tensor
    grads: list[torch.Tensor]
    d_out: float


# ----------------------------------------------------------------------------- helpers
def _make_x(values: torch.Tensor, layout: str, dtype: torch.dtype):
    """``(leaf, view)``: a leaf in ``dtype`` and the function giving the (B, S, D) input
    holding ``values`` in ``layout``."""
    b, s, d = values.shape
    if layout == "contiguous":
        return values.to(dtype), lambda t: t
    if layout == "seq_first":  # (seq, batch, width) storage, as in torch's default layout
        return values.transpose(0, 1).contiguous().to(dtype), lambda t: t.transpose(0, 1)
    if layout == "offset_slice":
        big = torch.zeros(b, s + 2, d + 3, dtype=torch.float64)
        big[:, 1:1 + s, 2:2 + d] = values
        return big.to(dtype), lambda t: t[:, 1:1 + s, 2:2 + d]
    if layout == "batch_expanded":
        return values[:1].to(dtype), lambda t: t.expand(b, -1, -1)
    raise KeyError(layout)


def _x_values(shape: tuple[int, int, int], layout: str, g: torch.Generator) -> torch.Tensor:
    x = torch.randn(*shape, generator=g, dtype=torch.float64)
    return x[:1].expand(shape).clone() if layout == "batch_expanded" else x


def _loss(layout: str, out: torch.Tensor, g: torch.Generator):
    """``(outputs, grad_outputs)``: the upstream gradient of ``out`` (B, S, D) in ``layout``."""
    b, s, d = out.shape

    def rand(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64).to(out.dtype)

    if layout == "sum":
        return [out.sum()], None
    if layout == "mean":
        return [out.mean()], None
    if layout == "slice":
        return [out[:, s // 2:].sum()], None
    if layout == "strided_slice":
        return [(out[:, ::2, 1::2] * 0.5).sum()], None
    if layout == "transposed":
        return [out], [rand(b, d, s).transpose(1, 2)]
    if layout == "expanded":
        return [out], [rand(1, 1, d).expand(b, s, d)]
    if layout == "first_token":  # a gradient for only some outputs
        return [out[:, 0]], [rand(b, d)]
    if layout == "one_batch_row":
        return [out[-1]], [rand(s, d)]
    raise KeyError(layout)


def _pull_back(layout: str, out: torch.Tensor, g: torch.Generator, wrt: list[torch.Tensor]
               ) -> Result:
    outputs, grads_out = _loss(layout, out, g)
    *grads, d_out = torch.autograd.grad(outputs, [*wrt, out], grads_out, allow_unused=True)
    grads = [torch.zeros_like(t) if gr is None else gr for t, gr in zip(wrt, grads, strict=True)]
    return Result(out.detach().double(), [x.double() for x in grads],
                  0.0 if d_out is None else d_out.abs().max().item())


def _err(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item() if a.numel() else 0.0


def _amax(x: torch.Tensor) -> float:
    return x.abs().max().item() if x.numel() else 0.0


def assert_rule(got: Result, low: Result, ref: Result, dtype: torch.dtype, terms: float
                ) -> None:
    """FlashAttention's rule with a floor of a few ulps of the larger of the value itself
    and ``terms``, the size of the terms that cancel in a gradient (see
    tests/attention/test_grad_layouts.py)."""
    floor = FLOOR[dtype]
    assert torch.isfinite(got.out).all()
    assert _err(got.out, ref.out) <= 2 * _err(low.out, ref.out) \
        + floor * max(1.0, _amax(ref.out)), "output"
    assert len(got.grads) == len(ref.grads)
    for i, (gr, lg, rg) in enumerate(zip(got.grads, low.grads, ref.grads, strict=True)):
        assert gr.shape == rg.shape, i
        assert torch.isfinite(gr).all(), i
        scale = max(1.0, _amax(rg), terms)
        assert _err(gr, rg) <= 2 * _err(lg, rg) + 2 * floor * scale, f"gradient {i}"


def _set_backend(module: nn.Module, backend: str) -> nn.Module:
    for m in module.modules():
        if isinstance(m, MultiHeadAttention):
            m.backend = backend
    return module


@contextlib.contextmanager
def _small_blocks(block: int):
    """Small blocks and tiles, so short sequences cross many; ``auto`` considers the
    sparse kernel at every length."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(blocksparse, "DEFAULT_BLOCK", block)
        mp.setattr(tiled, "DEFAULT_BLOCK_Q", block)
        mp.setattr(tiled, "DEFAULT_BLOCK_K", block + 3)
        mp.setattr(blocksparse_cpu, "CHUNK_ELEMENTS", 256)
        mp.setattr(kernels, "SPARSE_MIN_LEN", 1)
        yield


@st.composite
def patterns(draw, batch: int, seq: int, k_len: int):
    """(name, mask) for a layer: none, causal, padding, sparse patterns, a dense tensor."""
    kind = draw(st.sampled_from(["none", "causal", "key_padding", "sliding_window",
                                 "window_global", "bigbird", "documents", "dense",
                                 "window_and_padding"]))
    lengths = draw(st.lists(st.integers(1, k_len), min_size=batch, max_size=batch))
    if kind == "none":
        return kind, None
    if kind == "causal":
        return kind, M.causal("bottom_right")
    if kind == "key_padding":
        return f"key_padding({lengths})", M.key_padding(lengths)
    if kind == "sliding_window":
        w = draw(st.integers(1, 8))
        return f"sliding_window({w})", M.sliding_window(w)
    if kind == "window_global":
        w, pos = draw(st.integers(1, 6)), draw(st.integers(0, min(seq, k_len) - 1))
        return f"sliding_window({w}) | global_tokens([{pos}])", \
            M.sliding_window(w) | M.global_tokens([pos])
    if kind == "bigbird":
        bs, seed = draw(st.integers(2, 6)), draw(st.integers(0, 9))
        return f"bigbird({bs}, 1, {seed})", M.bigbird(bs, 1, seed=seed)
    if kind == "documents":
        n = max(seq, k_len)
        docs = draw(st.lists(st.integers(1, n), min_size=1, max_size=3)
                    .filter(lambda r: sum(r) <= n))
        return f"documents({docs})", M.documents(docs)
    if kind == "dense":
        seed = draw(st.integers(0, 2**16))
        g = torch.Generator().manual_seed(seed)
        return f"dense(seed={seed})", torch.rand(batch, 1, seq, k_len, generator=g) > 0.4
    w = draw(st.integers(1, 6))
    return f"sliding_window({w}) & key_padding({lengths})", \
        M.sliding_window(w) & M.key_padding(lengths)


# ----------------------------------------------------------------------------- MHA
@st.composite
def mha_cases(draw) -> dict[str, Any]:
    heads = draw(st.sampled_from([1, 2, 4]))
    kv_heads = draw(st.sampled_from([k for k in (1, 2, 4) if heads % k == 0]))
    d_model = heads * draw(st.sampled_from([2, 4, 6]))
    cross = draw(st.sampled_from(["self", "self", "cross", "cross_dim"]))
    batch, seq = draw(st.integers(1, 3)), draw(st.integers(1, 24))
    k_len = seq if cross == "self" else draw(st.integers(1, 24))
    name, mask = draw(patterns(batch, seq, k_len))
    return dict(heads=heads, kv_heads=kv_heads, d_model=d_model, cross=cross, batch=batch,
                seq=seq, k_len=k_len, mask_name=name, mask=mask,
                fusion=draw(st.sampled_from(["concat", "glu"])),
                rope=cross == "self" and draw(st.booleans()), bias=draw(st.booleans()),
                gate_grad=draw(st.booleans()),
                backend=draw(st.sampled_from(BACKENDS)),
                dtype=draw(st.sampled_from([torch.float32, torch.float32, torch.float64,
                                            torch.bfloat16])),
                x_layout=draw(st.sampled_from(X_LAYOUTS)),
                ctx_layout=draw(st.sampled_from(X_LAYOUTS)),
                grad_layout=draw(st.sampled_from(GRAD_LAYOUTS)),
                block=draw(st.sampled_from([4, 8])), seed=draw(st.integers(0, 2**16)))


def _mha_run(c: dict, module: MultiHeadAttention, dtype: torch.dtype, contiguous: bool
             ) -> Result:
    g = torch.Generator().manual_seed(c["seed"])
    x_leaf, x_view = _make_x(_x_values((c["batch"], c["seq"], c["d_model"]), c["x_layout"], g),
                             c["x_layout"], torch.float64)
    x_leaf = x_leaf.to(dtype).requires_grad_()
    x = x_view(x_leaf)
    wrt, ctx = [x_leaf], None
    if c["cross"] != "self":
        width = c["d_model"] if c["cross"] == "cross" else c["d_model"] + 2
        ctx_leaf, ctx_view = _make_x(_x_values((c["batch"], c["k_len"], width), c["ctx_layout"],
                                               g), c["ctx_layout"], torch.float64)
        ctx_leaf = ctx_leaf.to(dtype).requires_grad_()
        ctx = ctx_view(ctx_leaf)
        wrt.append(ctx_leaf)
    if contiguous:
        x = x.contiguous()
        ctx = None if ctx is None else ctx.contiguous()
    params = [p for p in module.parameters()]
    if c["gate_grad"]:
        module.head_gate.requires_grad_()
        params.append(module.head_gate)
    out = module(x, context=ctx, mask=c["mask"])
    return _pull_back(c["grad_layout"], out, g, wrt + params)


def _mha(c: dict) -> MultiHeadAttention:
    torch.manual_seed(c["seed"])
    ctx_dim = c["d_model"] + 2 if c["cross"] == "cross_dim" else None
    mha = MultiHeadAttention(c["d_model"], c["heads"], c["kv_heads"], c["fusion"],
                             bias=c["bias"], rope=c["rope"], context_dim=ctx_dim,
                             backend=c["backend"])
    with torch.no_grad():  # non-trivial biases and head gates
        for p in mha.parameters():
            if p.ndim == 1:
                p.normal_(0, 0.3)
        mha.set_head_gates(1.0 + 0.5 * torch.rand(c["heads"]))
    return mha


@SWEEP
@given(c=mha_cases())
def test_multihead_attention_gradients_match_float64(c: dict) -> None:
    base = _mha(c)
    with _small_blocks(c["block"]):
        ref = _mha_run(c, _set_backend(copy.deepcopy(base).double(), "math"), torch.float64,
                       True)
        low = _mha_run(c, _set_backend(copy.deepcopy(base).to(c["dtype"]), "math"), c["dtype"],
                       True)
        got = _mha_run(c, copy.deepcopy(base).to(c["dtype"]), c["dtype"], False)
    terms = _amax(ref.out) * ref.d_out * c["batch"] * max(c["seq"], c["k_len"])
    assert_rule(got, low, ref, c["dtype"], terms)


def _to_torch(ours: MultiHeadAttention) -> nn.MultiheadAttention:
    ref = nn.MultiheadAttention(ours.d_model, ours.num_heads, batch_first=True,
                                bias=ours.in_proj.bias is not None, dtype=torch.float64)
    with torch.no_grad():
        ref.in_proj_weight.copy_(ours.in_proj.weight)
        ref.out_proj.weight.copy_(ours.out_proj.weight)
        if ours.in_proj.bias is not None:
            ref.in_proj_bias.copy_(ours.in_proj.bias)
            ref.out_proj.bias.copy_(ours.out_proj.bias)
    return ref


@SWEEP
@given(heads=st.sampled_from([1, 2, 4]), batch=st.integers(1, 3), seq=st.integers(1, 20),
       bias=st.booleans(), mask_kind=st.sampled_from(["none", "key_padding", "dense"]),
       backend=st.sampled_from(BACKENDS), x_layout=st.sampled_from(X_LAYOUTS),
       grad_layout=st.sampled_from(GRAD_LAYOUTS), data=st.data())
def test_multihead_attention_matches_torch_gradients(heads, batch, seq, bias, mask_kind,
                                                     backend, x_layout, grad_layout,
                                                     data) -> None:
    # the configuration torch.nn.MultiheadAttention has: concat fusion, one K/V head per
    # query head, no RoPE; float64, masks without fully masked rows (torch gives NaN there)
    seed = data.draw(st.integers(0, 2**16))
    torch.manual_seed(seed)
    ours = MultiHeadAttention(4 * heads, heads, bias=bias, backend=backend).double()
    theirs = _to_torch(ours)
    ours_kw: dict[str, Any] = {}
    theirs_kw: dict[str, Any] = {"need_weights": False}
    if mask_kind == "key_padding":
        lengths = data.draw(st.lists(st.integers(1, seq), min_size=batch, max_size=batch))
        ours_kw["mask"] = M.key_padding(lengths)
        theirs_kw["key_padding_mask"] = torch.arange(seq)[None] >= torch.tensor(lengths)[:, None]
    elif mask_kind == "dense":
        g = torch.Generator().manual_seed(seed)
        allowed = (torch.rand(seq, seq, generator=g) > 0.5) | torch.eye(seq, dtype=torch.bool)
        ours_kw["mask"] = allowed
        theirs_kw["attn_mask"] = ~allowed  # torch: True = may not attend

    def run(fn, params, contiguous):
        g = torch.Generator().manual_seed(seed)
        leaf, view = _make_x(_x_values((batch, seq, 4 * heads), x_layout, g), x_layout,
                             torch.float64)
        leaf.requires_grad_()
        x = view(leaf).contiguous() if contiguous else view(leaf)
        return _pull_back(grad_layout, fn(x), g, [leaf, *params])

    with _small_blocks(4):
        got = run(lambda x: ours(x, **ours_kw), [ours.in_proj.weight, ours.out_proj.weight],
                  False)
    ref = run(lambda x: theirs(x, x, x, **theirs_kw)[0],
              [theirs.in_proj_weight, theirs.out_proj.weight], True)
    torch.testing.assert_close(got.out, ref.out, atol=1e-12, rtol=1e-10)
    for a, b in zip(got.grads, ref.grads, strict=True):
        torch.testing.assert_close(a, b, atol=1e-11, rtol=1e-9)


# ----------------------------------------------------------------------------- layers
@st.composite
def layer_cases(draw) -> dict[str, Any]:
    batch, seq = draw(st.integers(1, 3)), draw(st.integers(1, 24))
    name, mask = draw(patterns(batch, seq, seq))
    return dict(batch=batch, seq=seq, mask_name=name, mask=mask,
                heads=draw(st.sampled_from([(2, 2), (4, 2), (4, 1)])),
                norm_first=draw(st.booleans()), rope=draw(st.booleans()),
                activation=draw(st.sampled_from(["gelu", "swiglu"])),
                backend=draw(st.sampled_from(BACKENDS)),
                dtype=draw(st.sampled_from([torch.float32, torch.float64])),
                checkpoint=draw(st.booleans()), x_layout=draw(st.sampled_from(X_LAYOUTS)),
                grad_layout=draw(st.sampled_from(GRAD_LAYOUTS)),
                block=draw(st.sampled_from([4, 8])), seed=draw(st.integers(0, 2**16)))


class _Stack(nn.Module):
    """Two encoder layers, each optionally under gradient checkpointing."""

    def __init__(self, c: dict) -> None:
        super().__init__()
        h, hk = c["heads"]
        self.layers = nn.ModuleList(
            EncoderLayer(16, h, 24, num_kv_heads=hk, dropout=0.0, activation=c["activation"],
                         norm_first=c["norm_first"], rope=c["rope"], backend=c["backend"])
            for _ in range(2))
        self.checkpoint = c["checkpoint"]

    def forward(self, x: torch.Tensor, mask) -> torch.Tensor:
        for layer in self.layers:
            x = maybe_checkpoint(self.checkpoint, layer, x, mask)
        return x


@SWEEP
@given(c=layer_cases())
def test_checkpointed_encoder_layers_match_float64(c: dict) -> None:
    torch.manual_seed(c["seed"])
    base = _Stack(c).train()

    def run(module, dtype, contiguous):
        g = torch.Generator().manual_seed(c["seed"])
        leaf, view = _make_x(_x_values((c["batch"], c["seq"], 16), c["x_layout"], g),
                             c["x_layout"], torch.float64)
        leaf = leaf.to(dtype).requires_grad_()
        x = view(leaf).contiguous() if contiguous else view(leaf)
        return _pull_back(c["grad_layout"], module(x, c["mask"]), g,
                          [leaf, *module.parameters()])

    def plain(dtype):
        m = _set_backend(copy.deepcopy(base).to(dtype), "math")
        m.checkpoint = False
        return m

    with _small_blocks(c["block"]):
        ref = run(plain(torch.float64), torch.float64, True)
        low = run(plain(c["dtype"]), c["dtype"], True)
        got = run(copy.deepcopy(base).to(c["dtype"]), c["dtype"], False)
    terms = _amax(ref.out) * ref.d_out * c["batch"] * c["seq"] * 4
    assert_rule(got, low, ref, c["dtype"], terms)


# ----------------------------------------------------------------------------- models
@st.composite
def model_cases(draw) -> dict[str, Any]:
    pattern = draw(st.sampled_from([
        None, {"sliding_window": 3}, {"sliding_window": 2, "global_tokens": [0]},
        {"bigbird": {"block_size": 4, "num_random_blocks": 1, "seed": 1}},
        {"sliding_window": 4, "causal": True}]))
    return dict(pattern=pattern, backend=draw(st.sampled_from(BACKENDS)),
                batch=draw(st.integers(1, 3)), seq=draw(st.integers(2, 20)),
                options=draw(st.sampled_from([
                    {}, {"position": "rope", "num_kv_heads": 2, "fusion": "glu"},
                    {"norm_first": False, "pooling": "mean", "norm": "rmsnorm"}])),
                checkpoint=draw(st.booleans()),
                loss=draw(st.sampled_from(["cross_entropy", "logits", "hidden"])),
                grad_layout=draw(st.sampled_from(GRAD_LAYOUTS)),
                block=draw(st.sampled_from([4, 8])), seed=draw(st.integers(0, 2**16)))


@MODEL_SWEEP
@given(c=model_cases())
def test_encoder_classifier_gradients_match_float64(c: dict) -> None:
    config = preset("tiny", d_model=16, num_heads=4, d_ff=32, max_position=32, num_labels=3,
                    attention_pattern=c["pattern"], backend=c["backend"], **c["options"])
    torch.manual_seed(c["seed"])
    base = EncoderClassifier(config).train()  # dropout is 0 in "tiny": training is exact
    g = torch.Generator().manual_seed(c["seed"])
    ids = torch.randint(3, 256, (c["batch"], c["seq"]), generator=g)
    lengths = torch.randint(1, c["seq"] + 1, (c["batch"],), generator=g)
    attention_mask = (torch.arange(c["seq"])[None] < lengths[:, None]).long()
    labels = torch.randint(0, 3, (c["batch"],), generator=g)

    def run(model, checkpoint):
        model.set_gradient_checkpointing(checkpoint)
        g = torch.Generator().manual_seed(c["seed"] + 1)
        params = list(model.parameters())
        if c["loss"] == "hidden":
            return _pull_back(c["grad_layout"], model.encode(ids, attention_mask), g, params)
        out = model(ids, attention_mask, labels=labels)
        if c["loss"] == "cross_entropy":
            loss = out["loss"]
            grads = torch.autograd.grad(loss, params, allow_unused=True)
        else:
            loss = out["logits"]
            grads = torch.autograd.grad(loss, params, loss.new_ones(()).expand(loss.shape),
                                        allow_unused=True)  # an expanded gradient
        grads = [torch.zeros_like(p) if gr is None else gr for p, gr in zip(params, grads,
                                                                            strict=True)]
        return Result(loss.detach().double().reshape(1, 1, -1), [x.double() for x in grads],
                      1.0)

    with _small_blocks(c["block"]):
        ref = run(_set_backend(copy.deepcopy(base).double(), "math"), False)
        low = run(_set_backend(copy.deepcopy(base), "math"), False)
        got = run(copy.deepcopy(base), c["checkpoint"])
    terms = max(1.0, _amax(ref.out)) * ref.d_out * c["batch"] * c["seq"] * 4
    assert_rule(got, low, ref, torch.float32, terms)


def test_checkpointing_keeps_gradients_exact_with_a_sparse_pattern() -> None:
    # recomputation in the backward must reproduce the forward bit for bit: the same
    # gradients with and without checkpointing, on the block-sparse kernel
    config = preset("tiny", d_model=16, num_heads=4, d_ff=32, max_position=64, num_labels=2,
                    attention_pattern={"sliding_window": 5, "global_tokens": [0]},
                    backend="blocksparse")
    torch.manual_seed(0)
    model = EncoderClassifier(config).train()
    ids = torch.randint(3, 256, (2, 40))
    mask = torch.ones(2, 40, dtype=torch.long)
    mask[1, 30:] = 0
    grads = []
    with _small_blocks(8):
        for checkpoint in (False, True):
            model.set_gradient_checkpointing(checkpoint)
            model.zero_grad()
            model.encode(ids, mask).sum().backward()
            grads.append([p.grad for p in model.parameters()])
    for a, b in zip(*grads, strict=True):
        assert (a is None) == (b is None)  # the classifier head is not used by encode()
        if a is not None:
            torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_cross_entropy_of_a_sequence_first_batch_trains() -> None:
    # the (seq, batch, width) layout a torch-style caller hands in, through checkpointed
    # layers on the block-sparse kernel: a loss that falls, with finite gradients
    torch.manual_seed(3)
    c = dict(heads=(4, 2), activation="swiglu", norm_first=True, rope=True,
             backend="blocksparse", checkpoint=True)
    stack = _Stack(c).train()
    head = nn.Linear(16, 2)
    opt = torch.optim.AdamW([*stack.parameters(), *head.parameters()], lr=1e-2)
    x = torch.randn(30, 4, 16)  # (seq, batch, width)
    y = (x[0, :, 0] > 0).long()
    losses = []
    with _small_blocks(8):
        for _ in range(15):
            h = stack(x.transpose(0, 1), M.sliding_window(4) | M.global_tokens([0]))
            loss = F.cross_entropy(head(h[:, 0]), y)
            opt.zero_grad()
            loss.backward()
            assert all(torch.isfinite(p.grad).all() for p in stack.parameters())
            opt.step()
            losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
