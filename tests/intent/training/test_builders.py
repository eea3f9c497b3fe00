"""What a recipe builds: the architecture part's fields are ModelConfig's, under its names,
so every one reaches the built network's config with no table between them; the recipe's
``train`` part is the Trainer's own TrainConfig."""

from __future__ import annotations

import dataclasses

import pytest

from headwise.intent.training.builders import build_intent_model, train_config
from headwise.intent.training.defaults import DEFAULT_EPOCHS, DEFAULT_LR
from headwise.intent.training.recipe import BiLSTM, IntentRecipe, Transformer
from headwise.models.config import ModelConfig
from headwise.models.io import model_config
from headwise.text import train_tokenizer
from headwise.train import TrainConfig

#: architecture fields that are not the network's: the tokenizer's (the network takes the
#: trained tokenizer's vocabulary), the input length (ModelConfig's ``max_position``) and
#: the overrides (ModelConfig fields themselves)
NOT_THE_NETWORKS = {"tokenizer", "vocab_size", "max_length", "model_overrides"}
TEXTS = ["我要查余额", "转账失败了", "信用卡怎么还款", "帮我冻结银行卡", "查一下账单"] * 4


@pytest.mark.parametrize("part", [Transformer, BiLSTM])
def test_every_shape_field_is_a_model_config_field(part):
    names = {f.name for f in dataclasses.fields(ModelConfig)}
    shape = {f.name for f in dataclasses.fields(part)} - NOT_THE_NETWORKS
    assert shape <= names, f"{part.__name__} fields that are not ModelConfig's: {shape - names}"


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(TEXTS, kind="char")


def test_transformer_fields_reach_its_config(tokenizer):
    part = Transformer(d_model=48, num_layers=3, num_heads=6, d_ff=80, fusion="glu",
                       norm="rmsnorm", position="rope", pooling="cls", dropout=0.2,
                       attention_dropout=0.15, max_length=40,
                       model_overrides={"number_heads": [0]})
    cfg = model_config(build_intent_model(IntentRecipe(architecture=part), tokenizer,
                                          ["a", "b", "c"]))
    for f in dataclasses.fields(part):
        if f.name not in NOT_THE_NETWORKS:
            assert getattr(cfg, f.name) == getattr(part, f.name), f.name
    assert (cfg.max_position, cfg.number_heads) == (40, [0])
    assert (cfg.vocab_size, cfg.num_labels, cfg.labels) == (tokenizer.vocab_size, 3,
                                                            ["a", "b", "c"])
    # d_ff unset: twice the model width
    cfg = model_config(build_intent_model(
        IntentRecipe(architecture=Transformer(d_model=48, num_heads=4)), tokenizer, ["a", "b"]))
    assert cfg.d_ff == 96


def test_bilstm_fields_reach_its_config(tokenizer):
    part = BiLSTM(lstm_embed_dim=24, lstm_hidden=20, lstm_pooling="attention", dropout=0.3)
    cfg = model_config(build_intent_model(IntentRecipe(architecture=part), tokenizer,
                                          ["a", "b"]))
    assert cfg.model_type == "bilstm"
    for f in dataclasses.fields(part):
        if f.name not in NOT_THE_NETWORKS:
            assert getattr(cfg, f.name) == getattr(part, f.name), f.name


def test_the_train_part_is_the_trainers_config():
    recipe = IntentRecipe.from_dict({"train": {
        "lr": 3e-4, "weight_decay": 0.05, "epochs": 7, "batch_size": 12, "warmup_ratio": 0.2,
        "schedule": "constant", "seed": 5, "patience": 2, "progress": False,
        "max_grad_norm": 0.5}})
    assert isinstance(recipe.train, TrainConfig)
    cfg = train_config(recipe, "macro_f1")
    assert cfg == dataclasses.replace(recipe.train, early_stopping_metric="macro_f1",
                                      early_stopping_mode="max", keep_checkpoints=1)
    # unset lr / epochs: the architecture's measured defaults
    cfg = train_config(IntentRecipe.from_dict({"architecture": {"type": "bilstm"}}), "accuracy")
    assert (cfg.lr, cfg.epochs) == (DEFAULT_LR["bilstm"], DEFAULT_EPOCHS["bilstm"])
    with pytest.raises(ValueError, match=r"^train\.early_stopping_metric is set by training"):
        IntentRecipe.from_dict({"train": {"early_stopping_metric": "loss2"}})


def test_tfidf_recipe_builds_no_network(tokenizer):
    with pytest.raises(ValueError, match="no network"):
        build_intent_model(IntentRecipe.from_dict({"architecture": {"type": "tfidf"}}),
                           tokenizer, ["a", "b"])


def test_a_pre_split_reaches_the_saved_tokenizer_and_every_slot_edge(tmp_path):
    """``architecture.pre_split="cjk_digits"`` on a SentencePiece checkpoint: the trained
    compound model's tokenizer (saved, loaded back) puts a token edge at every CJK
    character and digit run, so each gold span is a whole number of tokens."""
    pytest.importorskip("transformers")
    from hf_checkpoints import xlmr_unigram

    from headwise.intent.compound.classifier import CompoundClassifier
    from headwise.intent.training.pipeline import train_intent_classifier
    from headwise.text import Example, SlotSpan

    def row(text: str, intent: str, value: str) -> Example:
        start = text.index(value)
        span = SlotSpan("amount", start, start + len(value), value)
        return Example(text, (intent,), (span,), 0)

    rows = [row("我要提前还5000元", "prepay", "5000元"),
            row("转账150元给我妈", "transfer", "150元"),
            row("每个月还款2500元太多", "repay", "2500元"),
            row("提前还款3万元", "prepay", "3万元")]
    directory = xlmr_unigram(tmp_path / "xlmr")
    plain = {"type": "pretrained", "name": str(directory), "max_length": 24}
    recipe = {"architecture": {**plain, "pre_split": "cjk_digits"},
              "train": {"epochs": 1, "batch_size": 4, "lr": 1e-3, "progress": False},
              "task": {"type": "multi_label"}}
    trained = train_intent_classifier(rows * 2, rows, IntentRecipe.from_dict(recipe),
                                      out_dir=tmp_path / "m")
    assert trained.classifier.info["pretrained"]["pre_split"] == "cjk_digits"
    back = CompoundClassifier.load(tmp_path / "m")
    assert back.tokenizer.pre_split == "cjk_digits"
    for example in rows:
        offsets = back.tokenizer.offsets(example.text)
        starts, ends = {s for s, e in offsets}, {e for s, e in offsets}
        [span] = example.slots
        assert span.start in starts and span.end in ends, (example.text, offsets)
        cjk = [i for i, c in enumerate(example.text) if "\u4e00" <= c <= "\u9fff"]
        assert set(cjk) <= starts  # every CJK character starts a token
    with pytest.raises(ValueError, match="pre_split must be none or one of"):
        IntentRecipe.from_dict({"architecture": {**plain, "pre_split": "chars"}})
