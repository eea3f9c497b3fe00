"""A compound model whose thresholds are chosen for exact match (``task.threshold_metric``):
trained end to end, the thresholds are those tuned on its validation probabilities, score
the best exact match there, survive a save and load, and answer as ``decide`` says; the
recipe and a soup refuse what does not fit."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest

from headwise.intent.compound.classifier import CompoundClassifier
from headwise.intent.compound.thresholds import DEFAULT_GRID, decide, tune_thresholds
from headwise.intent.soup import uniform_soup
from headwise.intent.training.compound import compound_targets
from headwise.intent.training.pipeline import train_intent_classifier
from headwise.intent.training.recipe import IntentRecipe

RECIPE = {
    "architecture": {"type": "transformer", "tokenizer": "wordpiece", "vocab_size": 120,
                     "max_length": 24, "d_model": 32, "num_layers": 1, "num_heads": 4,
                     "d_ff": 64, "dropout": 0.0, "attention_dropout": 0.0},
    "train": {"epochs": 4, "batch_size": 8, "lr": 3e-3, "patience": None, "progress": False},
    "task": {"type": "multi_label", "threshold_metric": "exact_match"}}


@pytest.fixture(scope="module")
def trained(tmp_path_factory, compound_corpus):
    out = tmp_path_factory.mktemp("exact-match") / "model"
    result = train_intent_classifier(compound_corpus, compound_corpus,
                                     IntentRecipe.from_dict(RECIPE), out_dir=out)
    return result, out


def test_thresholds_are_tuned_for_exact_match_and_kept(trained, compound_corpus):
    result, out = trained
    clf = result.classifier
    texts = [e.text for e in compound_corpus]
    probs, _ = clf.analyse(texts)
    gold = compound_targets(compound_corpus, clf.intents)
    assert clf.thresholds == tune_thresholds(probs, gold, metric="exact_match")
    assert clf.thresholds.metric == "exact_match"
    em = (decide(probs, clf.thresholds) == gold).all(1).mean()
    assert result.valid_metrics["exact_match"] == pytest.approx(em)
    # no single threshold of the grid does better on these rows
    assert em >= max((decide(probs, t) == gold).all(1).mean() for t in DEFAULT_GRID)
    loaded = CompoundClassifier.load(out)
    assert loaded.thresholds == clf.thresholds
    answers = loaded.predict(texts[:12], top_k=len(clf.intents))
    chosen = decide(loaded.analyse(texts[:12])[0], loaded.thresholds)
    for answer, keep in zip(answers, chosen, strict=True):
        assert {name for name, _ in answer.intents} == \
            {clf.intents[j] for j in np.flatnonzero(keep)}


def test_the_recipe_refuses_exact_match_with_per_intent_thresholds():
    with pytest.raises(ValueError, match="use one of the two"):
        IntentRecipe.from_dict({**RECIPE, "task": {"type": "multi_label",
                                                   "threshold_metric": "exact_match",
                                                   "per_intent_thresholds": True}})
    with pytest.raises(ValueError, match="task.threshold_metric"):
        IntentRecipe.from_dict({**RECIPE, "task": {"type": "multi_label",
                                                   "threshold_metric": "accuracy"}})


def test_a_soup_of_members_tuned_for_different_metrics_is_refused(trained):
    clf = trained[0].classifier
    other = copy.deepcopy(clf)
    other.thresholds = dataclasses.replace(clf.thresholds, additional=None,
                                           metric="micro_f1")
    with pytest.raises(ValueError, match="tuned for different metrics"):
        uniform_soup([clf, other])
    soup = uniform_soup([clf, copy.deepcopy(clf)])
    assert soup.thresholds.metric == "exact_match"
    assert soup.thresholds.additional == clf.thresholds.additional
