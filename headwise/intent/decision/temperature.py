"""Confidence calibration by temperature scaling (Guo et al. 2017).

A classifier trained with cross-entropy is usually over-confident: its top softmax
probability is higher than its accuracy. Temperature scaling divides the logits by one
scalar ``T`` fitted on validation data (minimising the negative log-likelihood); it
changes no prediction, only the confidences, which the out-of-scope threshold and the
``predict`` output then read. :func:`headwise.train.expected_calibration_error` measures
the result.
"""

from __future__ import annotations

import math

import numpy as np
import torch

#: the fitted temperature is clamped into this range (a degenerate fit cannot run away)
T_MIN, T_MAX = 0.05, 20.0


def fit_temperature(logits: np.ndarray | torch.Tensor, labels: np.ndarray | torch.Tensor,
                    *, max_iter: int = 200) -> float:
    """The temperature ``T`` minimising the NLL of ``softmax(logits / T)``.

    Args:
        logits: (n, classes) validation logits.
        labels: (n,) integer class ids.
        max_iter: L-BFGS iterations.

    Returns:
        ``T`` in [:data:`T_MIN`, :data:`T_MAX`]; 1.0 for an empty validation set.

    Raises:
        ValueError: mismatched shapes or label ids outside the classes.
    """
    z = torch.as_tensor(np.asarray(logits), dtype=torch.float64)
    y = torch.as_tensor(np.asarray(labels), dtype=torch.long)
    if z.ndim != 2 or y.ndim != 1 or z.shape[0] != y.shape[0]:
        raise ValueError(f"logits must be (n, classes) and labels (n,), got {tuple(z.shape)} "
                         f"and {tuple(y.shape)}")
    if len(y) == 0:
        return 1.0
    if int(y.min()) < 0 or int(y.max()) >= z.shape[1]:
        raise ValueError(f"label ids must be in [0, {z.shape[1]})")
    log_t = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([log_t], lr=0.5, max_iter=max_iter, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(z / log_t.exp(), y)
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(closure)
    t = float(log_t.detach().exp())
    if not math.isfinite(t):
        return 1.0
    return min(max(t, T_MIN), T_MAX)


def calibrated_probs(logits: np.ndarray | torch.Tensor, temperature: float) -> np.ndarray:
    """``softmax(logits / temperature)`` as a float64 numpy array (rows sum to 1)."""
    z = torch.as_tensor(np.asarray(logits), dtype=torch.float64) / float(temperature)
    return torch.softmax(z, dim=-1).numpy()
