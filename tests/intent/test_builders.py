"""What a recipe builds: every recipe field that is also a ModelConfig or TrainConfig field is
passed on by one table (none copied, or forgotten, by hand), and each reaches the built
network's config or the Trainer's settings."""

from __future__ import annotations

import dataclasses

import pytest

from headwise.intent.training.builders import (
    BILSTM_CONFIG,
    TRAINER_FIELDS,
    TRANSFORMER_CONFIG,
    build_intent_model,
    train_config,
)
from headwise.intent.training.defaults import DEFAULT_EPOCHS, DEFAULT_LR
from headwise.intent.training.recipe import IntentRecipe
from headwise.models.config import ModelConfig
from headwise.models.io import model_config
from headwise.text import train_tokenizer
from headwise.train import TrainConfig

RECIPE = {f.name for f in dataclasses.fields(IntentRecipe)}
#: recipe fields that share a name with a ModelConfig field but are not the network's:
#: the tokenizer's vocabulary size (the network takes the trained tokenizer's)
NOT_THE_NETWORKS = {"vocab_size"}
TEXTS = ["我要查余额", "转账失败了", "信用卡怎么还款", "帮我冻结银行卡", "查一下账单"] * 4


def test_every_shared_model_field_is_in_a_table():
    shared = RECIPE & {f.name for f in dataclasses.fields(ModelConfig)}
    tabled = set(TRANSFORMER_CONFIG) | set(BILSTM_CONFIG) | NOT_THE_NETWORKS
    assert shared <= tabled, f"recipe fields not passed to ModelConfig: {shared - tabled}"
    names = {f.name for f in dataclasses.fields(ModelConfig)}
    assert set(TRANSFORMER_CONFIG.values()) <= names and set(BILSTM_CONFIG.values()) <= names
    assert set(TRANSFORMER_CONFIG) <= RECIPE and set(BILSTM_CONFIG) <= RECIPE


def test_every_shared_trainer_field_is_in_the_table():
    shared = RECIPE & {f.name for f in dataclasses.fields(TrainConfig)}
    assert shared == set(TRAINER_FIELDS)


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(TEXTS, kind="char")


def test_transformer_fields_reach_its_config(tokenizer):
    recipe = IntentRecipe(model="transformer", d_model=48, num_layers=3, num_heads=6, d_ff=80,
                          fusion="glu", norm="rmsnorm", position="rope", pooling="cls",
                          dropout=0.2, attention_dropout=0.15, max_length=40)
    cfg = model_config(build_intent_model(recipe, tokenizer, ["a", "b", "c"]))
    for r, c in TRANSFORMER_CONFIG.items():
        assert getattr(cfg, c) == getattr(recipe, r), r
    assert (cfg.vocab_size, cfg.num_labels, cfg.labels) == (tokenizer.vocab_size, 3,
                                                            ["a", "b", "c"])
    # d_ff unset: twice the model width
    cfg = model_config(build_intent_model(IntentRecipe(d_model=48, num_heads=4), tokenizer,
                                          ["a", "b"]))
    assert cfg.d_ff == 96


def test_bilstm_fields_reach_its_config(tokenizer):
    recipe = IntentRecipe(model="bilstm", lstm_embed_dim=24, lstm_hidden=20,
                          lstm_pooling="attention", dropout=0.3)
    cfg = model_config(build_intent_model(recipe, tokenizer, ["a", "b"]))
    assert cfg.model_type == "bilstm"
    for r, c in BILSTM_CONFIG.items():
        assert getattr(cfg, c) == getattr(recipe, r), r
    with pytest.raises(ValueError, match="BiLSTM takes no"):
        build_intent_model(recipe, tokenizer, ["a", "b"], multi_label=True)


def test_trainer_fields_reach_the_train_config():
    recipe = IntentRecipe(lr=3e-4, weight_decay=0.05, epochs=7, batch_size=12,
                          warmup_ratio=0.2, schedule="constant", seed=5, patience=2,
                          progress=False)
    cfg = train_config(recipe, "macro_f1")
    for name in TRAINER_FIELDS:
        assert getattr(cfg, name) == getattr(recipe, name), name
    assert (cfg.early_stopping_metric, cfg.early_stopping_mode) == ("macro_f1", "max")
    # unset lr / epochs: the model kind's measured defaults
    cfg = train_config(IntentRecipe(model="bilstm"), "accuracy")
    assert (cfg.lr, cfg.epochs) == (DEFAULT_LR["bilstm"], DEFAULT_EPOCHS["bilstm"])


def test_tfidf_recipe_builds_no_network(tokenizer):
    with pytest.raises(ValueError, match="no network"):
        build_intent_model(IntentRecipe(model="tfidf"), tokenizer, ["a", "b"])
