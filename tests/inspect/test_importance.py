"""Head importance against finite differences; ablation and pruning against gate settings."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from headwise.inspect.forward import attention_layers, label_ids
from headwise.inspect.importance import (
    ablation,
    gradient_importance,
    max_fraction_within,
    pruning_curve,
    pruning_fractions,
    set_gates,
)


def _loss(clf, text, gold):
    batch = clf.tokenizer([text], max_length=clf.max_length)
    with torch.no_grad():
        logits = clf.model(input_ids=batch["input_ids"],
                           attention_mask=batch["attention_mask"].bool())["logits"]
    return float(F.cross_entropy(logits, torch.tensor([gold])))


def _known(clf, examples, n):
    ex = [e for e in examples if e.label in clf.labels][:n]
    return [e.text for e in ex], label_ids(clf, [e.label for e in ex])


def test_gradient_importance_matches_finite_differences(tiny_clf64, demo_examples):
    clf = tiny_clf64
    texts, gold = _known(clf, demo_examples, 3)
    got = gradient_importance(clf, texts, gold, normalize=False)
    layers = attention_layers(clf.model)
    shape = (len(layers), layers[0].num_heads)
    eps, want = 1e-6, np.zeros(shape)
    for layer in range(shape[0]):
        for head in range(shape[1]):
            for text, g in zip(texts, gold, strict=True):
                plus, minus = np.ones(shape), np.ones(shape)
                plus[layer, head] += eps
                minus[layer, head] -= eps
                set_gates(clf, plus)
                up = _loss(clf, text, int(g))
                set_gates(clf, minus)
                down = _loss(clf, text, int(g))
                want[layer, head] += abs(up - down) / (2 * eps) / len(texts)
    set_gates(clf, np.ones(shape))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-9)
    normed = gradient_importance(clf, texts, gold)
    np.testing.assert_allclose(np.linalg.norm(normed, axis=1), 1.0)
    assert all(not m.head_gate.requires_grad for m in layers)  # gates put back


def test_ablation_is_the_accuracy_with_one_gate_closed(tiny_clf, demo_examples):
    clf = tiny_clf
    texts, gold = _known(clf, demo_examples, 10)
    out = ablation(clf, texts, gold)
    base = float((clf.logits(texts).argmax(1) == gold).mean())
    assert out["base_accuracy"] == pytest.approx(base)
    gates = np.ones((2, 4))
    gates[1, 2] = 0
    set_gates(clf, gates)
    closed = float((clf.logits(texts).argmax(1) == gold).mean())
    set_gates(clf, np.ones((2, 4)))
    assert out["accuracy"][1][2] == pytest.approx(closed)
    assert out["delta"][1][2] == pytest.approx(closed - base)
    assert all(bool((m.head_gate == 1).all()) for m in attention_layers(clf.model))


def test_pruning_curve_removes_the_least_important_first(tiny_clf, demo_examples):
    clf = tiny_clf
    texts, gold = _known(clf, demo_examples, 6)
    out = pruning_curve(clf, texts, gold, random_repeats=2, seed=3, step=0.25)
    assert out["num_heads"] == 8 and pruning_fractions(8) == list(range(9))
    assert out["importance"]["removed"] == pruning_fractions(8, 0.25) == [0, 2, 4, 6, 8]
    order = out["importance"]["order"]
    assert len(order) == 8 and len({tuple(x) for x in order}) == 8
    first = np.unravel_index(np.argmin(gradient_importance(clf, texts, gold)), (2, 4))
    assert tuple(order[0]) == tuple(int(i) for i in first)
    assert out["importance"]["accuracy"][0] == pytest.approx(out["base_accuracy"])
    set_gates(clf, np.zeros((2, 4)))
    none_left = float((clf.logits(texts).argmax(1) == gold).mean())
    set_gates(clf, np.ones((2, 4)))
    assert out["importance"]["accuracy"][-1] == pytest.approx(none_left)
    assert out["random"]["accuracy"][-1] == pytest.approx(none_left)
    assert np.array(out["random"]["runs"]).shape == (2, 5)
    assert out["max_fraction_within"]["importance"] == max_fraction_within(
        out["importance"]["fraction"], out["importance"]["accuracy"], out["base_accuracy"], 0.01)
    assert all(bool((m.head_gate == 1).all()) for m in attention_layers(clf.model))


def test_max_fraction_within_by_hand():
    assert max_fraction_within([0, 0.1, 0.2, 0.3], [0.9, 0.895, 0.85, 0.9], 0.9, 0.01) == 0.3
    assert max_fraction_within([0, 0.5], [0.5, 0.2], 0.9, 0.01) == 0.0


def test_removed_heads_score_zero_and_leave_the_layer_norm(tiny_clf, demo_examples):
    clf = tiny_clf
    texts, gold = _known(clf, demo_examples, 4)
    gates = np.ones((2, 4))
    gates[0, :2] = 0.0
    raw = gradient_importance(clf, texts, gold, gates=gates, normalize=False)
    assert (raw[0, :2] == 0).all() and (raw[0, 2:] > 0).all()
    normed = gradient_importance(clf, texts, gold, gates=gates)
    np.testing.assert_allclose(np.linalg.norm(normed[0, 2:]), 1.0)
    np.testing.assert_allclose(normed[0, 2:], raw[0, 2:] / np.linalg.norm(raw[0, 2:]))
