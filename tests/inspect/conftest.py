"""Tiny classifiers for the head-analysis tests (untrained: the statistics, importance and
rollout are checked against independent computations, not against what training finds)."""

from __future__ import annotations

import pytest
import torch

from headwise.demo.corpus import generate_demo_corpus
from headwise.intent.classifier import IntentClassifier
from headwise.intent.training.builders import build_intent_model
from headwise.intent.training.recipe import IntentRecipe
from headwise.text.char_level import train_char_tokenizer


@pytest.fixture(scope="session")
def demo_examples():
    corpus = generate_demo_corpus(seed=0, per_intent=4, oos=4)
    return corpus["train"] + corpus["test"]


def make_classifier(examples, *, num_heads=4, num_layers=2, pooling="mean", seed=0,
                    dtype=torch.float32, model_overrides=None) -> IntentClassifier:
    """A tiny untrained classifier of the default recipe at these sizes
    (``model_overrides`` None: the default number- and negation-aware heads)."""
    tok = train_char_tokenizer([e.text for e in examples])
    labels = sorted({e.label for e in examples if e.label != "oos"})
    recipe = IntentRecipe.from_dict({
        "architecture": {"d_model": 16, "num_layers": num_layers, "num_heads": num_heads,
                         "d_ff": 32, "pooling": pooling, "dropout": 0.0,
                         "attention_dropout": 0.0, "max_length": 48,
                         "model_overrides": model_overrides}})
    torch.manual_seed(seed)
    model = build_intent_model(recipe, tok, labels).to(dtype).eval()
    return IntentClassifier(model, tok, labels, max_length=recipe.architecture.max_length)


@pytest.fixture(scope="session")
def classifier_factory():
    """:func:`make_classifier`, for tests that build their own tiny classifier."""
    return make_classifier


@pytest.fixture(scope="session")
def tiny_clf(demo_examples):
    return make_classifier(demo_examples)


@pytest.fixture()
def tiny_clf64(demo_examples):
    return make_classifier(demo_examples, dtype=torch.float64, pooling="cls", seed=1)


@pytest.fixture(scope="session")
def small_report(tiny_clf, demo_examples, tmp_path_factory):
    """A full analysis of a few examples and its written report."""
    from headwise.inspect import InspectOptions, inspect_classifier, write_report

    examples = demo_examples[:16]
    analysis = inspect_classifier(
        tiny_clf, [e.text for e in examples], [e.label for e in examples],
        spans=[[(s.start, s.end, s.category) for s in e.spans] for e in examples],
        options=InspectOptions(importance_examples=6, ablation_examples=8, random_repeats=1,
                               faithfulness_examples=3, show_examples=4, pruning_step=0.25,
                               attribution_cases=3, agreement_examples=5,
                               deletion_examples=6))
    out = tmp_path_factory.mktemp("report")
    return analysis, write_report(analysis, out, title="test report")
