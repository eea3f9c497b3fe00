"""Before a run trains, it says its precision and its measured duration estimate, and keeps
the estimate beside the measured time: single-label and compound runs alike
(:meth:`headwise.train.Trainer.announce`)."""

from __future__ import annotations

import pytest

from headwise.intent.training.pipeline import train_intent_classifier
from headwise.intent.training.recipe import IntentRecipe, MultiLabel, Transformer, default_train

TINY = Transformer(tokenizer="wordpiece", vocab_size=120, max_length=24, d_model=32,
                   num_layers=1, num_heads=4, d_ff=64)


def _recipe(multi_label: bool) -> IntentRecipe:
    import dataclasses

    train = dataclasses.replace(default_train(TINY), epochs=2, batch_size=8, patience=None)
    return IntentRecipe(architecture=TINY, train=train,
                        **({"task": MultiLabel()} if multi_label else {}))


@pytest.mark.parametrize("multi_label", [False, True], ids=["single-label", "compound"])
def test_a_run_announces_its_precision_and_keeps_its_estimate(multi_label, compound_corpus,
                                                              tmp_path):
    if multi_label:
        train = compound_corpus
    else:
        train = [(e.text, e.intents[0]) for e in compound_corpus if len(e.intents) == 1]
    lines: list[str] = []
    trained = train_intent_classifier(train, train, _recipe(multi_label), out_dir=tmp_path,
                                      report=lines.append)
    said = "\n".join(lines)
    assert "precision fp32" in said or "precision bf16" in said
    assert "estimated training time: about" in said
    info = trained.classifier.info
    estimate = info["estimate"]
    # no early stopping: the forecast covers exactly the steps the run took
    assert estimate["steps"] == info["steps"]
    assert estimate["step_seconds"] > 0 and estimate["measured_batches"] >= 1
    assert info["precision"]["precision"] == estimate["precision"]

