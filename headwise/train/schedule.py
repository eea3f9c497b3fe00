"""Learning-rate schedules: linear warmup, then linear, cosine or no decay.

For the update with 0-based index ``s`` out of ``T`` updates, ``W`` of them warmup:

* warmup (``s < W``): ``factor = (s + 1) / W``, so the first update already moves and the
  last warmup update reaches the peak;
* after it, with ``p = (s - W) / (T - W)``:
  ``linear``: ``1 - p``; ``cosine``: ``(1 + cos(pi * p)) / 2``; ``constant``: ``1``.

The factor multiplies each parameter group's base learning rate. Decay never reaches 0
inside the run (the last update has ``p = (T - W - 1) / (T - W)``).
"""

from __future__ import annotations

import math
from typing import Any

from torch.optim import Optimizer

from headwise.train.config import SCHEDULES


def lr_factor(step: int, *, kind: str, warmup_steps: int, total_steps: int) -> float:
    """The learning-rate multiplier of update ``step`` (0-based).

    Args:
        step: index of the optimizer update.
        kind: "linear", "cosine" or "constant".
        warmup_steps: updates of linear warmup.
        total_steps: updates in the whole run.

    Returns:
        The multiplier, in ``(0, 1]`` for steps inside the run.

    Raises:
        ValueError: an unknown ``kind`` or negative counts.
    """
    if kind not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {kind!r}")
    if step < 0 or warmup_steps < 0 or total_steps < 0:
        raise ValueError("step, warmup_steps and total_steps must be non-negative")
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if kind == "constant":
        return 1.0
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    if kind == "linear":
        return 1.0 - progress
    return 0.5 * (1.0 + math.cos(math.pi * progress))


class LRSchedule:
    """Sets an optimizer's learning rates from the update index.

    The base learning rate of each group is its ``lr`` when the schedule is created.

    Args:
        optimizer: the optimizer to drive.
        kind: "linear", "cosine" or "constant".
        warmup_steps: updates of linear warmup.
        total_steps: updates in the whole run.
    """

    def __init__(self, optimizer: Optimizer, kind: str, warmup_steps: int,
                 total_steps: int) -> None:
        lr_factor(0, kind=kind, warmup_steps=warmup_steps, total_steps=total_steps)  # checks
        self.optimizer = optimizer
        self.kind = kind
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps
        self.base_lrs = [float(g["lr"]) for g in optimizer.param_groups]
        self.last_step = -1

    def apply(self, step: int) -> float:
        """Set every group's learning rate for update ``step``; return the first one."""
        factor = lr_factor(step, kind=self.kind, warmup_steps=self.warmup_steps,
                           total_steps=self.total_steps)
        for group, base in zip(self.optimizer.param_groups, self.base_lrs, strict=True):
            group["lr"] = base * factor
        self.last_step = step
        return self.base_lrs[0] * factor

    def state_dict(self) -> dict[str, Any]:
        """JSON-ready state."""
        return {"kind": self.kind, "warmup_steps": self.warmup_steps,
                "total_steps": self.total_steps, "base_lrs": list(self.base_lrs),
                "last_step": self.last_step}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the base learning rates and the last update index.

        The shape of the schedule (kind, warmup, total) stays the one this object was
        built with, so a resumed run may extend or change it.
        """
        self.base_lrs = [float(x) for x in state["base_lrs"]]
        self.last_step = int(state["last_step"])
