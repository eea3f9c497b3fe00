"""Temperature scaling against a float64 grid search of the same objective."""

from __future__ import annotations

import numpy as np
import pytest

from headwise.intent.decision.temperature import calibrated_probs, fit_temperature


def _nll(z, y, t):
    s = z / t
    s = s - s.max(1, keepdims=True)
    logp = s - np.log(np.exp(s).sum(1, keepdims=True))
    return -logp[np.arange(len(y)), y].mean()


@pytest.mark.parametrize("true_t", [0.5, 1.0, 2.5])
def test_fit_matches_grid_search_and_recovers_true_temperature(true_t):
    rng = np.random.default_rng(0)
    z = rng.normal(0, 3, size=(4000, 6))
    p = np.exp(z / true_t)
    p /= p.sum(1, keepdims=True)
    y = np.array([rng.choice(6, p=row) for row in p])
    t = fit_temperature(z, y)
    grid = np.exp(np.linspace(np.log(0.1), np.log(10), 4001))
    best = grid[np.argmin([_nll(z, y, g) for g in grid])]
    assert abs(t - best) / best < 0.01
    assert abs(t - true_t) / true_t < 0.1


def test_probs_rows_sum_to_one_and_keep_argmax():
    z = np.array([[2.0, 1.0, -1.0], [0.0, 3.0, 0.5]])
    p = calibrated_probs(z, 2.0)
    np.testing.assert_allclose(p.sum(1), 1.0)
    e = np.exp(z / 2.0)
    np.testing.assert_allclose(p, e / e.sum(1, keepdims=True))
    assert (p.argmax(1) == z.argmax(1)).all()


def test_bad_inputs():
    with pytest.raises(ValueError, match="logits must be"):
        fit_temperature(np.zeros((3, 2)), np.zeros(2, dtype=int))
    with pytest.raises(ValueError, match="label ids"):
        fit_temperature(np.zeros((2, 2)), np.array([0, 2]))
    assert fit_temperature(np.zeros((0, 2)), np.zeros(0, dtype=int)) == 1.0


def test_balanced_weights_and_weighted_smoothed_loss():
    import torch
    import torch.nn.functional as F
    from torch import nn

    from headwise.intent.training.losses import SmoothedClassification, balanced_class_weights

    w = balanced_class_weights([0, 0, 0, 1], 3)
    torch.testing.assert_close(w, torch.tensor([4 / 9, 4 / 3, 1.0]))  # n/(k*count); absent: 1

    class Fixed(nn.Module):
        def __init__(self, logits):
            super().__init__()
            self.logits = logits

        def forward(self, input_ids, attention_mask=None):
            return {"logits": self.logits}

    logits = torch.randn(4, 3, dtype=torch.float64)
    y = torch.tensor([0, 0, 0, 1])
    out = SmoothedClassification(Fixed(logits), 0.1, w)(torch.zeros(4, 2), labels=y)
    want = F.cross_entropy(logits.float(), y, weight=w, label_smoothing=0.1)
    torch.testing.assert_close(out["loss"], want)
    with pytest.raises(ValueError, match="positive"):
        SmoothedClassification(Fixed(logits), 0.0, torch.tensor([1.0, 0.0, 1.0]))
