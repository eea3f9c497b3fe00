"""Confident-learning label cleaning on data with known, planted label errors."""

from __future__ import annotations

import random

import numpy as np
import pytest

from headwise.intent import IntentRecipe, train_intent_classifier
from headwise.intent.training.cleaning import clean_labels, find_label_issues, out_of_fold_probs

WORDS = {
    "card_lost": ["lost", "card", "stolen", "missing", "wallet", "block"],
    "transfer": ["transfer", "send", "money", "account", "wire", "payee"],
    "refund": ["refund", "return", "order", "back", "cancel", "purchase"],
    "balance": ["balance", "check", "how", "much", "left", "statement"],
}


def _planted(n_per=40, flips=10, seed=0):
    """Texts of four intents with disjoint vocabularies; ``flips`` labels changed."""
    rng = random.Random(seed)
    texts, truth = [], []
    for intent, words in WORDS.items():
        for _ in range(n_per):
            texts.append(" ".join(rng.choice(words) for _ in range(5)))
            truth.append(intent)
    labels = list(truth)
    flipped = rng.sample(range(len(texts)), flips)
    for i in flipped:
        labels[i] = rng.choice([k for k in WORDS if k != truth[i]])
    return texts, labels, truth, set(flipped)


def test_planted_errors_are_found_with_their_true_intent():
    texts, labels, truth, flipped = _planted()
    issues = find_label_issues(texts, labels, folds=5)
    found = set(issues.indices)
    assert len(found & flipped) >= 9  # recall
    assert len(found - flipped) <= 2  # precision
    for i, suggestion in zip(issues.indices, issues.suggested, strict=True):
        if i in flipped:
            assert suggestion == truth[i]
    assert issues.total == len(texts) and issues.folds == 5
    assert sum(issues.by_label.values()) == len(issues.indices)


def test_out_of_fold_probabilities_are_distributions_over_sorted_intents():
    texts, labels, _, _ = _planted(n_per=10, flips=0)
    probs, intents = out_of_fold_probs(texts, labels, folds=3)
    assert intents == sorted(WORDS)
    assert probs.shape == (len(texts), len(WORDS))
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-9)
    # clean, separable data: every held-out example is predicted right
    pred = [intents[j] for j in probs.argmax(1)]
    assert pred == labels


@pytest.mark.parametrize("mode", ["drop", "relabel"])
def test_clean_labels_drops_or_relabels_in_order(mode):
    texts, labels, truth, flipped = _planted()
    new_t, new_y, issues = clean_labels(texts, labels, mode=mode)
    flagged = set(issues.indices)
    if mode == "drop":
        keep = [i for i in range(len(texts)) if i not in flagged]
        assert new_t == [texts[i] for i in keep] and new_y == [labels[i] for i in keep]
    else:
        assert new_t == texts
        wrong_before = sum(a != b for a, b in zip(labels, truth, strict=True))
        wrong_after = sum(a != b for a, b in zip(new_y, truth, strict=True))
        assert wrong_after <= wrong_before - 8


def test_cleaning_errors():
    with pytest.raises(ValueError, match="at least 2 examples"):
        find_label_issues(["a b", "c d", "e f"], ["x", "x", "y"])
    with pytest.raises(ValueError, match="two intents"):
        find_label_issues(["a", "b"], ["x", "x"])
    with pytest.raises(ValueError, match="labels"):
        out_of_fold_probs(["a"], ["x", "y"])
    with pytest.raises(ValueError, match="mode"):
        clean_labels(["a", "b"], ["x", "y"], mode="fix")
    with pytest.raises(ValueError, match="folds"):
        find_label_issues(["a b"] * 4, ["x", "x", "y", "y"], folds=1)
    with pytest.raises(ValueError, match="label_cleaning"):
        IntentRecipe.from_dict({"levers": {"label_cleaning": "yes"}})


def test_recipe_cleans_the_training_split(tmp_path):
    texts, labels, _, flipped = _planted()
    recipe = IntentRecipe.from_dict({
        "architecture": {"d_model": 32, "num_layers": 1, "num_heads": 4, "d_ff": 64,
                         "vocab_size": 200},
        "train": {"epochs": 1, "progress": False},
        "levers": {"label_cleaning": "drop"}})
    trained = train_intent_classifier(list(zip(texts, labels, strict=True)), None, recipe,
                                      out_dir=tmp_path / "m")
    info = trained.classifier.info["label_cleaning"]
    assert info["flagged"] >= 1 and info["total"] == trained.classifier.info["train_examples"] \
        + info["flagged"]
