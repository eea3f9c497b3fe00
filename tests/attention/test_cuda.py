"""Every attention backend on a CUDA GPU against a float64 reference computed on the CPU:
the output and the gradients of q, k and v, in float32, bfloat16 and float16, with no mask,
causal, sliding-window and key-padding patterns, a boolean mask with a fully masked row,
grouped-query heads and an additive bias; and ``MultiHeadAttention`` on the GPU against the
same module in float64 on the CPU. Skipped where there is no GPU (CI has none): run on a
lent GPU machine (``python -m pytest tests/attention/test_cuda.py``)."""

from __future__ import annotations

import pytest
import torch

from headwise.attention import MultiHeadAttention, attend, masks
from headwise.attention.kernels import supports_backward

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")

#: largest error allowed, relative to the reference's largest magnitude: a few units in the
#: last place of each dtype over a 64-wide dot product and a softmax over 200 keys
TOL = {torch.float32: 2e-4, torch.bfloat16: 4e-2, torch.float16: 5e-3}
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
B, H, KV, L, D = 2, 4, 2, 200, 64  # odd length: crosses every tile border unevenly


def _mask(name: str):
    """The mask argument, and its dense boolean form (batch | 1, 1, L, L) for the
    reference."""
    if name == "none":
        return None, torch.ones(1, 1, L, L, dtype=torch.bool)
    if name == "causal":
        pattern = masks.causal()
    elif name == "window":
        pattern = masks.sliding_window(48)
    elif name == "padding":
        pattern = masks.key_padding([L, 77])
    else:  # "dead_row": a boolean mask in which query 5 of batch 1 may attend to nothing
        dense = torch.rand(B, 1, L, L, generator=torch.Generator().manual_seed(1)) < 0.7
        dense[1, 0, 5] = False
        return dense.cuda(), dense
    return pattern, pattern.to_dense(L, L, batch_size=B)


def _reference(q, k, v, dense, bias, scale):
    """float64 attention on the CPU; a query with no allowed key gives zeros."""
    q, k, v = (t.detach().double().cpu().requires_grad_() for t in (q, k, v))
    groups = q.shape[1] // k.shape[1]
    scores = q @ k.repeat_interleave(groups, 1).transpose(-1, -2) * scale
    if bias is not None:
        scores = scores + bias.double().cpu()
    scores = scores.masked_fill(~dense, float("-inf"))
    weights = torch.softmax(scores, -1).nan_to_num(0.0)
    return q, k, v, weights @ v.repeat_interleave(groups, 1)


def _error(got: torch.Tensor, want: torch.Tensor) -> float:
    scale = float(want.detach().abs().max()) or 1.0
    return float((got.detach().double().cpu() - want.detach()).abs().max()) / scale


@pytest.mark.parametrize("dtype", list(DTYPES), ids=list(DTYPES))
@pytest.mark.parametrize("mask", ["none", "causal", "window", "padding", "dead_row"])
@pytest.mark.parametrize("backend", ["math", "sdpa", "tiled", "blocksparse", "flex", "auto"])
def test_backend_matches_float64_forward_and_backward(backend, mask, dtype):
    dt = DTYPES[dtype]
    if backend == "flex" and dtype != "bf16" and mask != "causal":
        pytest.skip("flex compiles per mask and dtype: bf16 for every mask, causal for each "
                    "dtype keeps the run short")
    g = torch.Generator().manual_seed(0)
    q = torch.randn(B, H, L, D, generator=g).to("cuda", dt).requires_grad_()
    k = torch.randn(B, KV, L, D, generator=g).to("cuda", dt).requires_grad_()
    v = torch.randn(B, KV, L, D, generator=g).to("cuda", dt).requires_grad_()
    bias = (torch.randn(1, H, L, L, generator=g) * 0.5).to("cuda", dt) \
        if mask == "none" else None
    arg, dense = _mask(mask)
    scale = D ** -0.5
    try:
        out = attend(q, k, v, arg, backend=backend, bias=bias)
    except ValueError as e:  # refused (the CPU suite tests what each backend refuses)
        pytest.skip(f"refused: {e}")
    rq, rk, rv, ref = _reference(q, k, v, dense, bias, scale)
    assert out.dtype == dt and out.device.type == "cuda"
    assert _error(out, ref) <= TOL[dt], (backend, mask, dtype, _error(out, ref))
    if mask == "dead_row":
        assert not out[1, :, 5].any()
    if backend == "flex" and not supports_backward(q.device):
        return
    grad = torch.randn(ref.shape, generator=g, dtype=torch.float64)
    (out * grad.to("cuda", dt)).sum().backward()
    (ref * grad).sum().backward()
    for name, got, want in (("q", q.grad, rq.grad), ("k", k.grad, rk.grad),
                            ("v", v.grad, rv.grad)):
        assert got is not None and torch.isfinite(got).all(), name
        assert _error(got, want) <= 2 * TOL[dt], \
            (backend, mask, dtype, name, _error(got, want))


@pytest.mark.parametrize("dtype", list(DTYPES), ids=list(DTYPES))
def test_multi_head_attention_on_the_gpu_matches_float64(dtype):
    dt = DTYPES[dtype]
    torch.manual_seed(0)
    cpu = MultiHeadAttention(256, 8, num_kv_heads=2, rope=True).double()
    gpu = MultiHeadAttention(256, 8, num_kv_heads=2, rope=True)
    gpu.load_state_dict(cpu.state_dict())
    gpu = gpu.to("cuda", dt)
    x = torch.randn(3, 150, 256, dtype=torch.float64)
    pattern = masks.key_padding([150, 31, 1])
    want = cpu(x, mask=pattern)
    got = gpu(x.to("cuda", dt), mask=pattern)
    assert _error(got, want.detach()) <= 4 * TOL[dt]
