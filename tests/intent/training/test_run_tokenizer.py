"""A resumed from-scratch run reads back the tokenizer it was trained with.

The checkpoint's embedding rows belong to the saved tokens: a resume reads them back rather
than relying on a new training to learn the same vocabulary (it does now, see
tests/text/test_wordpiece_vocab.py, but another version of the builder need not).
"""

from __future__ import annotations

import numpy as np
from tiny_corpus import INTENTS

from headwise.intent.training.builders import run_tokenizer
from headwise.intent.training.pipeline import train_intent_classifier
from headwise.intent.training.recipe import IntentRecipe

ROWS = [(t, k) for k, ts in INTENTS.items() for t in ts] * 3
TEXTS = [t for t, _ in ROWS]


def _vocab(tok):
    return sorted(tok.backend.get_vocab().items())


def test_a_resume_reads_the_saved_tokenizer_a_fresh_run_trains_one(tmp_path):
    recipe = IntentRecipe.from_dict({"architecture": {"tokenizer": "wordpiece", "vocab_size": 60}})
    first = run_tokenizer(TEXTS, recipe, tmp_path)
    assert (tmp_path / "tokenizer").is_dir()
    again = run_tokenizer(TEXTS, recipe, tmp_path, resume=True)
    assert _vocab(again) == _vocab(first)
    assert again(TEXTS)["input_ids"].tolist() == first(TEXTS)["input_ids"].tolist()
    # without a saved one, a resume trains (and saves) as a fresh run does
    other = run_tokenizer(TEXTS, recipe, tmp_path / "new", resume=True)
    assert (tmp_path / "new" / "tokenizer").is_dir() and other.vocab_size <= 60


def test_a_resumed_english_run_keeps_its_tokenizer_and_weights(tmp_path):
    recipe = IntentRecipe.from_dict({
        "architecture": {"tokenizer": "wordpiece", "vocab_size": 60, "d_model": 16,
                         "num_layers": 1, "num_heads": 2, "d_ff": 32},
        "train": {"epochs": 2, "batch_size": 8, "patience": None, "progress": False}})
    out = tmp_path / "run"
    done = train_intent_classifier(ROWS, ROWS, recipe, out_dir=out, keep_checkpoints=True)
    again = train_intent_classifier(ROWS, ROWS, recipe, out_dir=out, resume=True,
                                    keep_checkpoints=True)
    assert _vocab(again.classifier.tokenizer) == _vocab(done.classifier.tokenizer)
    np.testing.assert_array_equal(again.classifier.logits(TEXTS), done.classifier.logits(TEXTS))
