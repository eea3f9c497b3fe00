"""Tiny random-weight models over the tiny corpus, for tests that need a model but no
training (the service, the ONNX export): a WordPiece tokenizer and a 2-layer encoder."""

from __future__ import annotations

import torch
from tiny_corpus import INTENTS

from headwise.models import EncoderClassifier, ModelConfig
from headwise.text.tokenizer import Tokenizer

TEXTS = [t for ts in INTENTS.values() for t in ts]
#: short enough that ordinary sentences overflow it (long-text handling)
MAX_LENGTH = 12


def tiny_tokenizer() -> Tokenizer:
    return Tokenizer.train_wordpiece(TEXTS * 3, 120, min_frequency=1)


def tiny_encoder(tok: Tokenizer, seed: int = 0, **overrides) -> EncoderClassifier:
    torch.manual_seed(seed)
    cfg = ModelConfig(vocab_size=tok.vocab_size, d_model=32, num_layers=2, num_heads=4,
                      d_ff=64, num_labels=len(INTENTS), labels=list(INTENTS),
                      max_position=64, pad_token_id=tok.pad_token_id, dropout=0.0,
                      **overrides)
    model = EncoderClassifier(cfg).eval()
    with torch.no_grad():  # a larger head so the probabilities are not all ~1/3
        model.classifier.weight.normal_(0, 1.0)
    return model
