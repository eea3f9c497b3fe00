"""Helpers shared by the model tests."""

from __future__ import annotations

from torch import Tensor, nn

from headwise.attention import capture_attention


def first_layer_weights(model: nn.Module, ids: Tensor, mask: Tensor) -> Tensor:
    """The first layer's per-head attention weights (heads, queries, keys) of the first
    text, as float64, recorded by ``capture_attention``."""
    with capture_attention() as cap:
        model(ids, mask)
    return next(iter(cap.values()))[0].double()
