"""The bulk-drawn dropout (headwise.attention.dropout), its layer (headwise.nn.Dropout), the
math kernel it serves on the CPU, and the short-row softmax padding of that kernel.

References: torch.nn.functional.dropout's contract (zeros, the rest scaled by 1 / (1 - p),
the gradient through the same mask), binomial bounds on the drop rate, float64 softmax.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from headwise.attention import MultiHeadAttention, attend, select_backend
from headwise.attention import masks as M
from headwise.attention.dropout import dropout
from headwise.attention.kernels.reference import softmax_rows
from headwise.nn import Dropout


def _drop_rate_bounds(n: int, p: float) -> tuple[float, float]:
    """A 6-sigma binomial interval of the dropped fraction of n elements."""
    q = round(p * 65536) / 65536
    half = 6 * math.sqrt(q * (1 - q) / n)
    return q - half, q + half


@pytest.mark.parametrize("p", [0.01, 0.1, 0.5, 0.9])
def test_drop_rate_and_scale_match_the_probability(p):
    torch.manual_seed(0)
    x = torch.randn(1001, 257, dtype=torch.float64) + 3.0  # never zero
    y = dropout(x, p)
    dropped = y == 0
    lo, hi = _drop_rate_bounds(x.numel(), p)
    assert lo <= dropped.double().mean().item() <= hi
    torch.testing.assert_close(y[~dropped], x[~dropped] / (1 - p))


def test_every_16_bit_lane_of_a_draw_is_uniform():
    # each 64-bit draw feeds four consecutive elements: each of the four positions must drop
    # at the rate p (a draw over [0, 2^63) would keep the top lane's sign bit at 0)
    torch.manual_seed(1)
    x = torch.ones(400_000)
    dropped = (dropout(x, 0.5) == 0).view(-1, 4).double().mean(0)
    lo, hi = _drop_rate_bounds(100_000, 0.5)
    assert ((dropped >= lo) & (dropped <= hi)).all(), dropped


def test_gradient_is_the_same_mask_scaled():
    torch.manual_seed(2)
    x = torch.randn(7, 13, requires_grad=True)
    y = dropout(x, 0.3)
    g = torch.randn(7, 13)
    y.backward(g)
    keep = (y != 0).to(x.dtype)
    torch.testing.assert_close(x.grad, g * keep / 0.7)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16,
                                   torch.float64])
def test_dtypes_layouts_and_odd_sizes(dtype):
    torch.manual_seed(3)
    base = torch.randn(5, 11, 3, dtype=torch.float32).abs() + 1
    x = base.to(dtype).transpose(0, 2)  # non-contiguous, numel 165 (not a multiple of 4)
    y = dropout(x, 0.2)
    assert y.shape == x.shape and y.dtype == dtype
    kept = y != 0
    torch.testing.assert_close(y[kept].float(), (x[kept] / 0.8).float())


def test_identity_cases_and_errors():
    x = torch.randn(4, 4)
    assert dropout(x, 0.5, training=False) is x
    assert dropout(x, 0.0) is x
    empty = torch.randn(0, 8)
    assert dropout(empty, 0.5).shape == (0, 8)
    assert torch.equal(dropout(x, 1.0), torch.zeros(4, 4))
    for p in (-0.1, 1.5):
        with pytest.raises(ValueError, match="dropout probability"):
            dropout(x, p)


def test_reproducible_under_the_default_generator_and_recomputed_by_checkpointing():
    x = torch.randn(6, 40, requires_grad=True)
    torch.manual_seed(4)
    a = dropout(x, 0.4)
    torch.manual_seed(4)
    b = dropout(x, 0.4)
    assert torch.equal(a, b)

    def block(t):
        return dropout(t * 2.0, 0.4).sin()

    torch.manual_seed(5)
    block(x).sum().backward()
    plain = x.grad.clone()
    x.grad = None
    torch.manual_seed(5)
    checkpoint(block, x, use_reentrant=False).sum().backward()
    assert torch.equal(x.grad, plain)


def test_unbiased_like_torch_dropout():
    torch.manual_seed(6)
    x = torch.randn(64, 64, dtype=torch.float64)
    mean = torch.stack([dropout(x, 0.25) for _ in range(300)]).mean(0)
    ref = torch.stack([F.dropout(x, 0.25) for _ in range(300)]).mean(0)
    # both estimate x; their errors are of the same size
    assert (mean - x).abs().mean() < 1.5 * (ref - x).abs().mean()


def test_layer_is_a_torch_dropout_that_follows_train_and_eval():
    layer = Dropout(0.3)
    assert isinstance(layer, torch.nn.Dropout) and layer.p == 0.3
    x = torch.randn(50, 50) + 5
    assert (layer(x) == 0).any()
    layer.eval()
    assert layer(x) is x
    with pytest.raises(ValueError):
        Dropout(1.2)


def test_cpu_dropout_dispatches_to_the_math_kernel():
    q = torch.randn(2, 4, 15, 8)
    assert select_backend(q, q, M.key_padding([15, 9]), dropout_p=0.1) == "math"
    assert select_backend(q, q, None, dropout_p=0.1) == "math"
    assert select_backend(q, q, M.key_padding([15, 9])) == "sdpa"


def test_attention_layer_in_training_equals_the_math_backend():
    # the layer's direct path (no attend validation) and attend(backend="math") draw the same
    # mask from the same seed, and the dropped weights are zeros of the explicit weights
    torch.manual_seed(7)
    layer = MultiHeadAttention(32, 4, dropout=0.2).train()
    ref = MultiHeadAttention(32, 4, dropout=0.2, backend="math").train()
    ref.load_state_dict(layer.state_dict())
    x = torch.randn(3, 9, 32, requires_grad=True)
    mask = M.key_padding([9, 5, 1])
    torch.manual_seed(8)
    out = layer(x, mask=mask)
    torch.manual_seed(8)
    expected = ref(x, mask=mask)
    torch.testing.assert_close(out, expected)
    out.sum().backward()
    assert torch.isfinite(x.grad).all()
    layer.eval()
    torch.manual_seed(8)
    assert not torch.allclose(layer(x, mask=mask), out)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 8, 15, 16, 17, 33])
def test_softmax_rows_of_every_length_match_float64(n):
    torch.manual_seed(9)
    scores = torch.randn(2, 3, 5, n, requires_grad=True)
    mask = torch.rand(2, 1, 5, n) > 0.3
    mask[0, 0, 0] = False  # a row with no allowed key: zeros
    got = softmax_rows(scores, mask)
    ref_scores = scores.detach().double().requires_grad_()
    row_ok = mask.any(-1, keepdim=True)
    ref = torch.softmax(ref_scores.masked_fill(~mask, float("-inf")), -1)
    ref = torch.where(row_ok, ref, 0.0)
    torch.testing.assert_close(got.double(), ref.nan_to_num(0.0), atol=1e-6, rtol=1e-5)
    g = torch.randn_like(got)
    got.backward(g)
    torch.softmax(ref_scores.masked_fill(~(mask | ~row_ok), float("-inf")), -1).mul(
        row_ok).backward(g.double())
    torch.testing.assert_close(scores.grad.double(), ref_scores.grad, atol=1e-6, rtol=1e-5)
    unmasked = softmax_rows(scores.detach())
    torch.testing.assert_close(unmasked.double(), torch.softmax(scores.detach().double(), -1))


def test_math_attention_with_dropout_under_bf16_autocast():
    torch.manual_seed(10)
    q, k, v = (torch.randn(2, 4, 11, 16, dtype=torch.bfloat16) for _ in range(3))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, w = attend(q, k, v, M.key_padding([11, 6]), dropout_p=0.1, return_weights=True)
    assert out.dtype == torch.bfloat16 and w.dtype == torch.float32
    assert w[1, :, :, 6:].eq(0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 11))


@pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")
def test_softmax_padding_is_not_traced_into_a_graph():
    # a graph traced on a short row serves every length (the ONNX export traces the model)
    traced = torch.jit.trace(lambda s: softmax_rows(s), torch.randn(2, 6))
    for n in (3, 6, 20):
        x = torch.randn(2, n)
        torch.testing.assert_close(traced(x), torch.softmax(x, -1))
