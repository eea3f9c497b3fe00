"""Early stopping on a validation metric, and which evaluation was best."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


class EarlyStopping:
    """Tracks the best value of one metric and counts evaluations without improvement.

    Args:
        metric: key of the validation metrics to watch.
        mode: "min" (smaller is better) or "max".
        patience: evaluations without improvement before stopping; None never stops.

    Raises:
        ValueError: an unknown mode or a non-positive patience.
    """

    def __init__(self, metric: str, mode: str = "min", patience: int | None = None) -> None:
        if mode not in ("min", "max"):
            raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
        if patience is not None and patience <= 0:
            raise ValueError(f"patience must be positive or None, got {patience}")
        self.metric = metric
        self.mode = mode
        self.patience = patience
        self.best: float | None = None
        self.best_step: int | None = None
        self.bad_evals = 0

    def update(self, metrics: Mapping[str, float], step: int) -> bool:
        """Record one evaluation; return whether it is a new best.

        A strictly better value is an improvement; NaN never is.

        Raises:
            KeyError: ``metrics`` lacks the watched metric.
        """
        if self.metric not in metrics:
            raise KeyError(f"early-stopping metric {self.metric!r} is not among the "
                           f"validation metrics {sorted(metrics)}")
        value = float(metrics[self.metric])
        better = not math.isnan(value) and (
            self.best is None
            or (value < self.best if self.mode == "min" else value > self.best))
        if better:
            self.best, self.best_step, self.bad_evals = value, step, 0
        else:
            self.bad_evals += 1
        return better

    @property
    def should_stop(self) -> bool:
        """Whether ``patience`` evaluations in a row brought no improvement."""
        return self.patience is not None and self.bad_evals >= self.patience

    def state_dict(self) -> dict[str, Any]:
        """JSON-ready state."""
        return {"metric": self.metric, "mode": self.mode, "best": self.best,
                "best_step": self.best_step, "bad_evals": self.bad_evals}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` output (the metric and mode must match)."""
        if (state["metric"], state["mode"]) != (self.metric, self.mode):
            raise ValueError(f"checkpoint tracked {state['metric']!r} ({state['mode']}), "
                             f"this run tracks {self.metric!r} ({self.mode})")
        self.best = state["best"]
        self.best_step = state["best_step"]
        self.bad_evals = int(state["bad_evals"])
