"""What an :class:`~headwise.intent.recipe.IntentRecipe` builds: the freshly initialised
network (Transformer or BiLSTM classifier), its number and negation cue tokens, and the
Trainer settings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from headwise.models.config import ModelConfig
from headwise.models.io import build_model
from headwise.text.negation_tokens import negation_token_ids
from headwise.text.number_tokens import number_token_ids
from headwise.text.tokenizer import Tokenizer
from headwise.train import TrainConfig

if TYPE_CHECKING:
    from headwise.intent.recipe import IntentRecipe

__all__ = ["DEFAULT_LR", "build_intent_model", "mark_cue_tokens", "train_config"]

#: default peak learning rate per model kind (AdamW), when the recipe gives none
DEFAULT_LR = {"transformer": 1e-3, "bilstm": 2e-3, "pretrained": 5e-5}


def build_intent_model(recipe: IntentRecipe, tokenizer: Tokenizer, labels: list[str],
                       **fields: Any) -> nn.Module:
    """A freshly initialised Transformer or BiLSTM classifier for ``labels``.

    ``fields`` are further ModelConfig fields of the Transformer (the joint model passes
    ``model_type``, ``multi_label`` and ``slot_tags``).
    """
    common = dict(vocab_size=tokenizer.vocab_size, num_labels=len(labels), labels=labels,
                  pad_token_id=tokenizer.pad_token_id, dropout=recipe.dropout)
    if recipe.kind == "tfidf":
        raise ValueError("a TF-IDF recipe has no network to build")
    if recipe.kind == "bilstm":
        if fields:
            raise ValueError(f"the BiLSTM takes no {sorted(fields)}")
        cfg = ModelConfig(model_type="bilstm", lstm_embed_dim=recipe.lstm_embed_dim,
                          lstm_hidden=recipe.lstm_hidden, lstm_pooling=recipe.lstm_pooling,
                          **common, **recipe.model_overrides)
    else:
        cfg = ModelConfig(d_model=recipe.d_model, num_layers=recipe.num_layers,
                          num_heads=recipe.num_heads, d_ff=recipe.d_ff or 2 * recipe.d_model,
                          fusion=recipe.fusion, norm=recipe.norm, position=recipe.position,
                          pooling=recipe.pooling, attention_dropout=recipe.attention_dropout,
                          max_position=recipe.max_length, **common,
                          **{**recipe.model_overrides, **fields})
    return build_model(cfg)


def mark_cue_tokens(model: nn.Module, tokenizer: Tokenizer) -> None:
    """Tell a model with number- or negation-aware heads which of the tokenizer's ids are
    numbers and negation cues (a no-op for models without such heads)."""
    config = getattr(model, "config", None)
    if isinstance(config, ModelConfig) and config.number_heads:
        model.encoder.set_number_tokens(number_token_ids(tokenizer))
    if isinstance(config, ModelConfig) and config.negation_heads:
        model.encoder.set_negation_tokens(negation_token_ids(tokenizer))


def train_config(recipe: IntentRecipe, metric: str) -> TrainConfig:
    """The Trainer settings of a recipe: validated every epoch, early stopping on the
    validation ``metric`` (larger is better), one checkpoint kept."""
    lr = recipe.lr if recipe.lr is not None else DEFAULT_LR[recipe.kind]
    return TrainConfig(lr=lr, weight_decay=recipe.weight_decay, epochs=recipe.epochs,
                       batch_size=recipe.batch_size, warmup_ratio=recipe.warmup_ratio,
                       schedule=recipe.schedule, seed=recipe.seed, eval_every="epoch",
                       early_stopping_metric=metric, early_stopping_mode="max",
                       patience=recipe.patience, keep_checkpoints=1, progress=recipe.progress,
                       device="cpu" if not torch.cuda.is_available() else None)
