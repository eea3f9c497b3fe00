"""Dropout (Srivastava et al. 2014) whose keep mask is drawn in bulk on the CPU.

PyTorch's CPU dropout draws one Bernoulli sample per element from its Mersenne-Twister
generator, one element after another: on the short batches of intent fine-tuning that draw
costs more than the multiplication it masks (BENCHMARKS ``cpu_finetune:cpu``, the dropout
part). Here one 64-bit draw from the same generator gives four 16-bit uniform integers, and
an element is kept when its integer is at or above ``round(p * 65536)`` within the 16-bit
range: the drop probability is ``p`` rounded to a multiple of 1/65536 (0.1 becomes
0.100006). The output is ``x * keep / (1 - p)``, the gradient ``grad * keep / (1 - p)``,
as in ``torch.nn.functional.dropout``. The mask comes from ``torch``'s default generator,
so ``torch.manual_seed`` makes it reproducible and activation checkpointing, which saves
and restores that generator's state, recomputes the same mask.

Off the CPU (where PyTorch's dropout is one fused kernel) this is
``torch.nn.functional.dropout``. The attention weights' dropout of the math kernel and
:class:`headwise.nn.Dropout` (every hidden-state dropout of headwise's models) call it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["dropout"]

#: the 16-bit uniform integers of one 64-bit draw
_LANES = 4


def dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """Zero each element of ``x`` with probability ``p`` and scale the rest by 1 / (1 - p).

    Args:
        x: any floating tensor, any layout (the output is contiguous on the CPU).
        p: the drop probability, in [0, 1].
        training: False returns ``x`` itself, as ``p == 0`` does.

    Returns:
        A tensor of ``x``'s shape and dtype.

    Raises:
        ValueError: ``p`` outside [0, 1].
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    if not training or p == 0.0 or x.numel() == 0:
        return x
    if p == 1.0:
        return x * 0.0
    if x.device.type != "cpu":
        return F.dropout(x, p, True)
    n = x.numel()
    words = torch.empty((n + _LANES - 1) // _LANES, dtype=torch.int64)
    words.random_(-2 ** 63, None)  # the full 64-bit range: every 16-bit lane uniform
    threshold = round(p * 65536) - 32768
    keep = words.view(torch.int16)[:n].view(x.shape) >= threshold
    return x * (keep.to(x.dtype) * (1.0 / (1.0 - p)))
