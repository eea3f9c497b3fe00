"""Masked-LM self-pretraining before fine-tuning an intent classifier."""

from __future__ import annotations

import pytest
import torch

from headwise.demo.corpus import generate_demo_corpus
from headwise.intent import IntentRecipe, train_intent_classifier
from headwise.intent.training.builders import build_intent_model
from headwise.intent.training.data import encode_texts
from headwise.intent.training.pretrain import pretrain_encoder
from headwise.text import train_tokenizer
from headwise.train import TrainConfig


@pytest.fixture(scope="module")
def corpus():
    c = generate_demo_corpus(seed=0, per_intent=12)
    return [(e.text, e.label) for e in c["train"]], [(e.text, e.label) for e in c["valid"]]


def test_pretraining_lowers_the_masked_lm_loss_and_leaves_the_head(corpus, tmp_path):
    texts = [t for t, _ in corpus[0]]
    tok = train_tokenizer(texts, kind="wordpiece", vocab_size=400)
    recipe = IntentRecipe.from_dict({
        "architecture": {"d_model": 32, "num_layers": 1, "num_heads": 4, "d_ff": 64}})
    torch.manual_seed(0)
    model = build_intent_model(recipe, tok, ["a", "b"])
    head = model.classifier.weight.detach().clone()
    emb = model.encoder.embeddings.word_embeddings.weight.detach().clone()
    ids = encode_texts(tok, texts, 32)
    config = TrainConfig(lr=3e-3, epochs=6, batch_size=32, warmup_ratio=0.1, progress=False,
                         device="cpu", log_every=1)
    result = pretrain_encoder(model, tok, ids, config, out_dir=tmp_path / "pre")
    assert result.steps > 0 and result.last_loss < result.first_loss - 0.5
    assert torch.equal(model.classifier.weight, head)
    assert not torch.equal(model.encoder.embeddings.word_embeddings.weight, emb)
    assert not (tmp_path / "pre").exists(), "the stage's checkpoints must be removed"


def test_recipe_pretrains_then_fine_tunes(corpus, tmp_path):
    recipe = IntentRecipe.from_dict(
        {"architecture": {"d_model": 32, "num_layers": 1, "num_heads": 4, "d_ff": 64,
                          "vocab_size": 400},
         "train": {"epochs": 2, "progress": False}, "levers": {"pretrain_epochs": 2}})
    trained = train_intent_classifier(corpus[0], corpus[1], recipe, out_dir=tmp_path / "m")
    info = trained.classifier.info["pretrain"]
    assert info["epochs"] == 2 and info["steps"] > 0
    assert trained.classifier.info["recipe"]["levers"]["pretrain_epochs"] == 2
    assert trained.classifier.predict(corpus[1][0][0])  # a working classifier


@pytest.mark.parametrize("fields, match", [
    ({"architecture": {"type": "bilstm"}, "levers": {"pretrain_epochs": 1}},
     r"^levers\.pretrain_epochs: masked-LM self-pretraining is the from-scratch Transformer"),
    ({"levers": {"pretrain_epochs": -1}}, r"levers\.pretrain_epochs"),
    ({"levers": {"pretrain_mask_prob": 0.0}}, r"levers\.pretrain_mask_prob"),
])
def test_recipe_rejects_bad_pretraining(fields, match):
    with pytest.raises(ValueError, match=match):
        IntentRecipe.from_dict(fields)
