"""Normalisation layers whose statistics run in float32, also under autocast."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

NORMS = ("layernorm", "rmsnorm")


def _stat_dtype(dtype: torch.dtype) -> torch.dtype:
    """Statistics in float32 for half types (and under autocast), float64 stays float64."""
    return torch.float64 if dtype == torch.float64 else torch.float32


class LayerNorm(nn.Module):
    """Layer normalisation (Ba et al. 2016) with float32 statistics.

    Args:
        dim: size of the normalised (last) dimension.
        eps: added to the variance.
        bias: learn an additive bias (beta) besides the scale (gamma).
    """

    def __init__(self, dim: int, eps: float = 1e-5, bias: bool = True) -> None:
        super().__init__()
        self.dim, self.eps = dim, eps
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim)) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        """Normalise ``x`` (..., dim); returns x's dtype."""
        ct = _stat_dtype(x.dtype)
        with torch.autocast(x.device.type, enabled=False):
            b = None if self.bias is None else self.bias.to(ct)
            y = F.layer_norm(x.to(ct), (self.dim,), self.weight.to(ct), b, self.eps)
        return y.to(x.dtype)


class RMSNorm(nn.Module):
    """Root-mean-square normalisation (Zhang & Sennrich 2019) with float32 statistics.

    ``y = x / sqrt(mean(x^2) + eps) * weight``.
    """

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.dim, self.eps = dim, eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        """Normalise ``x`` (..., dim); returns x's dtype."""
        ct = _stat_dtype(x.dtype)
        with torch.autocast(x.device.type, enabled=False):
            xf = x.to(ct)
            y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
            y = y * self.weight.to(ct)
        return y.to(x.dtype)


def build_norm(kind: str, dim: int, eps: float) -> nn.Module:
    """A norm by name: ``"layernorm"`` or ``"rmsnorm"``.

    Raises:
        ValueError: an unknown name.
    """
    if kind == "layernorm":
        return LayerNorm(dim, eps)
    if kind == "rmsnorm":
        return RMSNorm(dim, eps)
    raise ValueError(f"norm must be one of {NORMS}, got {kind!r}")
