"""Whether PyTorch is building a graph of the code it runs (``torch.jit.trace``, the ONNX
export, ``torch.compile`` / ``torch.export``) instead of running it eagerly.

A choice made from the values or the machine at hand (a softmax row padded to this CPU's
vector width, a backend picked for gradients, a range check on a tensor's values) must not
be baked into a graph that later serves other inputs and machines.
"""

from __future__ import annotations

import torch

__all__ = ["building_graph"]


def building_graph() -> bool:
    """True while tracing or compiling: what runs now is recorded, not only computed."""
    return torch.jit.is_tracing() or torch.compiler.is_compiling()
