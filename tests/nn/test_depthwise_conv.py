"""The depthwise convolution before attention: against a hand-computed window in float64,
padding, every gradient layout, dtypes and refusals."""

from __future__ import annotations

import pytest
import torch

from headwise.nn import DepthwiseConvolution


def _by_hand(x: torch.Tensor, keep: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor
             ) -> torch.Tensor:
    """y[b, t, c] = x[b, t, c] + keep[b, t] * (bias[c] + sum_j w[c, j] * keep * x at
    t + j - k // 2), zero outside the sequence: a loop over every position."""
    batch, seq, channels = x.shape
    k = weight.shape[-1]
    out = x.clone()
    for b in range(batch):
        for t in range(seq):
            if not keep[b, t]:
                continue
            for c in range(channels):
                total = bias[c].clone()
                for j in range(k):
                    s = t + j - k // 2
                    if 0 <= s < seq and keep[b, s]:
                        total = total + weight[c, 0, j] * x[b, s, c]
                out[b, t, c] = x[b, t, c] + total
    return out


@pytest.mark.parametrize("kernel_size", [3, 5])
def test_each_channel_mixes_its_own_neighbours(kernel_size):
    torch.manual_seed(0)
    conv = DepthwiseConvolution(6, kernel_size).double()
    x = torch.randn(2, 7, 6, dtype=torch.float64)
    keep = torch.tensor([[True] * 7, [True] * 4 + [False] * 3])
    expected = _by_hand(x, keep, conv.conv.weight.detach(), conv.conv.bias.detach())
    torch.testing.assert_close(conv(x, keep), expected, rtol=0, atol=1e-12)
    # padding comes back unchanged, and nothing of it reaches a real token
    out = conv(x, keep)
    torch.testing.assert_close(out[1, 4:], x[1, 4:], rtol=0, atol=0)
    noisy = x.clone()
    noisy[1, 4:] = 1e3
    torch.testing.assert_close(conv(noisy, keep)[1, :4], out[1, :4], rtol=0, atol=1e-12)
    # without a mask every position is real
    torch.testing.assert_close(conv(x), _by_hand(x, torch.ones(2, 7, dtype=torch.bool),
                                                  conv.conv.weight.detach(),
                                                  conv.conv.bias.detach()), rtol=0, atol=1e-12)


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
def test_gradients_match_float64_in_every_layout(layout):
    torch.manual_seed(1)
    conv = DepthwiseConvolution(8, 3)
    reference = DepthwiseConvolution(8, 3).double()
    reference.load_state_dict({k: v.double() for k, v in conv.state_dict().items()})
    base = torch.randn(2, 5, 8)
    if layout == "transposed":
        x = base.transpose(0, 1).contiguous().transpose(0, 1)
    elif layout == "sliced":
        x = torch.randn(2, 10, 8)[:, ::2]
    else:
        x = base
    assert layout == "contiguous" or not x.is_contiguous()
    keep = torch.tensor([[True] * 5, [True, True, True, False, False]])
    grad = torch.randn(8, 5, 2).permute(2, 1, 0)  # a non-contiguous upstream gradient
    x = x.clone().requires_grad_(layout == "contiguous") if layout == "contiguous" \
        else x.requires_grad_(True)
    x64 = x.detach().double().requires_grad_(True)
    conv(x, keep).backward(grad)
    reference(x64, keep).backward(grad.double())
    torch.testing.assert_close(x.grad.double(), x64.grad, rtol=0, atol=1e-5)
    torch.testing.assert_close(conv.conv.weight.grad.double(), reference.conv.weight.grad,
                               rtol=0, atol=1e-5)


def test_bfloat16_near_float32_cast_and_under_autocast():
    torch.manual_seed(2)
    conv = DepthwiseConvolution(16, 3)
    x = torch.randn(3, 9, 16)
    reference = conv(x)
    half = DepthwiseConvolution(16, 3).bfloat16()
    half.load_state_dict(conv.state_dict())
    out = half(x.bfloat16())
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), reference, rtol=0, atol=5e-2)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # how the Trainer runs bf16
        mixed = conv(x)
    torch.testing.assert_close(mixed.float(), reference, rtol=0, atol=5e-2)


def test_empty_batches_and_bad_shapes():
    conv = DepthwiseConvolution(4, 3)
    assert conv(torch.zeros(0, 5, 4)).shape == (0, 5, 4)
    with pytest.raises(ValueError, match="odd"):
        DepthwiseConvolution(4, 4)
    with pytest.raises(ValueError, match="odd"):
        DepthwiseConvolution(4, 1)
    with pytest.raises(ValueError, match="batch, seq, d_model"):
        conv(torch.zeros(5, 4))
    with pytest.raises(ValueError, match="keep must be"):
        conv(torch.zeros(2, 5, 4), torch.ones(2, 4, dtype=torch.bool))


def test_a_fresh_convolution_keeps_the_embeddings_scale():
    """Its bias starts at zero: PyTorch's default bias (up to 1/sqrt(3) here) is one vector
    added to every token, and swamped embeddings drawn at 0.02 (a demo Transformer with it
    stayed at chance). The output stays on the input's scale and tells tokens apart."""
    torch.manual_seed(3)
    conv = DepthwiseConvolution(64, 3)
    assert torch.equal(conv.conv.bias, torch.zeros(64))
    x = torch.randn(4, 12, 64) * 0.02
    out = conv(x)
    ratio = (out.norm() / x.norm()).item()
    assert 0.5 < ratio < 3.0, ratio
    centred = out - out.mean(dim=(0, 1))
    assert centred.norm() > 0.5 * out.norm()  # not one shared vector
