"""A depthwise convolution over the sequence, as a residual step before attention.

Each channel of a token mixes its own values at the ``kernel_size`` nearest positions
(the depthwise convolution of the Conformer's convolution module, Gulati et al. 2020,
without its gating and pointwise projections; the layers above mix the channels). It gives
a from-scratch encoder the n-gram reading a recurrent or convolutional network starts with:
a negation cue and the verb after it are one local pattern from the first step.
"""

from __future__ import annotations

from torch import Tensor, nn

__all__ = ["DepthwiseConvolution"]


class DepthwiseConvolution(nn.Module):
    """``x + DepthwiseConv1d(x)``, padding positions zeroed on both sides.

    Args:
        d_model: channels.
        kernel_size: an odd width of at least 3 (the window is centred on each token).

    ``forward(x, keep)`` takes ``x`` (batch, seq, d_model) and ``keep`` (batch, seq),
    True for real tokens (or None: all real). A padding position contributes nothing to
    its neighbours and comes back unchanged, so the output on real tokens does not depend
    on how much padding follows them.
    """

    def __init__(self, d_model: int, kernel_size: int) -> None:
        super().__init__()
        if kernel_size < 3 or kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be odd and at least 3, got {kernel_size}")
        self.kernel_size = kernel_size
        self.conv = nn.Conv1d(d_model, d_model, kernel_size, padding=kernel_size // 2,
                              groups=d_model)
        # the weights keep PyTorch's default (the window's sum as large as one token's
        # value); the bias starts at zero: its default, up to 1/sqrt(kernel_size), is one
        # vector added to every token, which would swamp embeddings drawn at 0.02
        nn.init.zeros_(self.conv.bias)

    def forward(self, x: Tensor, keep: Tensor | None = None) -> Tensor:
        """(batch, seq, d_model) -> the same shape."""
        if x.ndim != 3:
            raise ValueError(f"x must be (batch, seq, d_model), got {tuple(x.shape)}")
        if keep is not None and tuple(keep.shape) != tuple(x.shape[:2]):
            raise ValueError(f"keep must be {tuple(x.shape[:2])}, got {tuple(keep.shape)}")
        gate = None if keep is None else keep.to(x.dtype).unsqueeze(-1)
        inputs = x if gate is None else x * gate
        local = self.conv(inputs.transpose(1, 2)).transpose(1, 2)
        return x + (local if gate is None else local * gate)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}"
