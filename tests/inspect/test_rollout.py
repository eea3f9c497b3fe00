"""Rollout against explicit matrix products, and the whole rollout matrix
(``rollout_matrix``, which /v1/explain uses) against a hand-computed example."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from headwise.inspect.forward import NoAttentionError, attention_layers
from headwise.inspect.rollout import attention_rollout, head_rollout, rollout_matrix


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


def tensor_rollout(weights, *, add_residual=True):
    return torch.from_numpy(rollout_matrix(weights, 0.5 if add_residual else None))


def test_rollout_by_hand():
    # layer 1: two heads whose mean is [[.5, .5], [0, 1]]; layer 2: the mean [[1, 0], [.5, .5]]
    w1 = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [0.0, 1.0]]])
    w2 = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [1.0, 0.0]]])
    # + I and renormalised: A1 = [[.75, .25], [0, 1]], A2 = [[1, 0], [.25, .75]]
    # rollout = A2 @ A1 = [[.75, .25], [.1875, .8125]]
    out = tensor_rollout([w1, w2])
    assert out.dtype == torch.float64
    np.testing.assert_allclose(out.numpy(), [[0.75, 0.25], [0.1875, 0.8125]], atol=1e-12)
    np.testing.assert_allclose(tensor_rollout(torch.stack([w1, w2])).numpy(), out.numpy())
    # without the residual: the plain product of the head means
    plain = tensor_rollout([w1, w2], add_residual=False)
    np.testing.assert_allclose(plain.numpy(), [[0.5, 0.5], [0.25, 0.75]], atol=1e-12)


def test_rollout_rows_stay_distributions_and_one_layer_is_its_own():
    torch.manual_seed(0)
    w = torch.softmax(torch.randn(3, 4, 6, 6), -1)
    out = tensor_rollout(w)
    np.testing.assert_allclose(out.sum(-1).numpy(), 1.0, atol=1e-12)
    one = tensor_rollout(w[:1])
    want = (w[0].double().mean(0) + torch.eye(6, dtype=torch.float64)) / 2
    np.testing.assert_allclose(one.numpy(), want.numpy(), atol=1e-12)
    with pytest.raises(ValueError, match="at least one layer"):
        tensor_rollout([])
    with pytest.raises(ValueError, match="layer 1"):
        tensor_rollout([w[0], w[1, :, :5, :5]])


def test_attention_layers_refuses_a_model_without_attention():
    with pytest.raises(NoAttentionError, match="Linear"):
        attention_layers(torch.nn.Linear(2, 2))
