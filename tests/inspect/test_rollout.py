"""Rollout against explicit matrix products."""

from __future__ import annotations

import numpy as np

from headwise.inspect.rollout import attention_rollout, head_rollout


def _weights(seed=0, layers=3, heads=2, n=5):
    rng = np.random.default_rng(seed)
    return rng.dirichlet(np.ones(n), size=(layers, heads, n))


def _mix(a):
    m = 0.5 * a + 0.5 * np.eye(a.shape[-1])
    return m / m.sum(-1, keepdims=True)


def test_rollout_is_the_product_of_residual_layers():
    w = _weights()
    full = np.linalg.multi_dot([_mix(w[layer].mean(0)) for layer in (2, 1, 0)])
    np.testing.assert_allclose(attention_rollout(w, "cls"), full[0])
    np.testing.assert_allclose(attention_rollout(w, "mean"), full.mean(0))
    assert attention_rollout(w, "cls").sum() == np.float64(1.0) or \
        abs(attention_rollout(w, "cls").sum() - 1) < 1e-12


def test_head_rollout_uses_one_head_over_the_mean_below():
    w = _weights(1)
    got = head_rollout(w, "cls")
    below = _mix(w[1].mean(0)) @ _mix(w[0].mean(0))
    np.testing.assert_allclose(got[2, 1], (_mix(w[2, 1]) @ below)[0])
    np.testing.assert_allclose(got[0, 0], _mix(w[0, 0])[0])
    np.testing.assert_allclose(got.sum(-1), 1.0)
