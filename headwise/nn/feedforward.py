"""Position-wise feed-forward layers: the paper's two-layer FFN and the GLU family."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from headwise.nn.dropout import Dropout

ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,  # exact (erf) GELU, as in BERT
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
}
#: GLU variants (Shazeer 2020): name -> activation of the gate
GLU_VARIANTS = {"swiglu": F.silu, "geglu": F.gelu, "reglu": F.relu}


class FeedForward(nn.Module):
    """``FFN(x) = W_2 dropout(act(W_1 x + b_1)) + b_2`` (Vaswani et al. 2017).

    Args:
        d_model: input/output width.
        d_ff: hidden width.
        activation: ``"relu"``, ``"gelu"``, ``"gelu_tanh"`` or ``"silu"``.
        dropout: dropout after the activation.
        bias: biases in both linear layers.
    """

    def __init__(self, d_model: int, d_ff: int, activation: str = "gelu", dropout: float = 0.0,
                 bias: bool = True) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        self.activation = activation
        self.w1 = nn.Linear(d_model, d_ff, bias=bias)
        self.w2 = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        """Apply the FFN to (..., d_model)."""
        return self.w2(self.dropout(ACTIVATIONS[self.activation](self.w1(x))))


class GLUFeedForward(nn.Module):
    """``FFN_GLU(x) = W_2 (act(W_1 x) * W_3 x)`` (Shazeer 2020, "GLU Variants Improve
    Transformer"); ``act`` is SiLU for SwiGLU, GELU for GEGLU, ReLU for ReGLU.

    W_1 and W_3 are one fused projection.
    """

    def __init__(self, d_model: int, d_ff: int, variant: str = "swiglu", dropout: float = 0.0,
                 bias: bool = False) -> None:
        super().__init__()
        if variant not in GLU_VARIANTS:
            raise ValueError(f"variant must be one of {sorted(GLU_VARIANTS)}, got {variant!r}")
        self.variant = variant
        self.w13 = nn.Linear(d_model, 2 * d_ff, bias=bias)
        self.w2 = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        """Apply the gated FFN to (..., d_model)."""
        a, b = self.w13(x).chunk(2, dim=-1)
        return self.w2(self.dropout(GLU_VARIANTS[self.variant](a) * b))


def build_feedforward(activation: str, d_model: int, d_ff: int, dropout: float = 0.0,
                      bias: bool = True) -> nn.Module:
    """A plain FFN for ``relu/gelu/gelu_tanh/silu``, a GLU FFN for ``swiglu/geglu/reglu``.

    Raises:
        ValueError: an unknown activation.
    """
    if activation in GLU_VARIANTS:
        return GLUFeedForward(d_model, d_ff, activation, dropout, bias)
    return FeedForward(d_model, d_ff, activation, dropout, bias)
