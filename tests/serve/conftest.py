"""Fixtures of the serve tests: tiny saved classifiers and a test client."""

from __future__ import annotations

import pytest
import torch
from serve_helpers import wait_ready
from tiny_corpus import INTENTS
from tiny_models import MAX_LENGTH, tiny_encoder, tiny_tokenizer

from headwise.intent.classifier import IntentClassifier
from headwise.models import BiLSTMClassifier


@pytest.fixture(scope="session")
def encoder_dir(tmp_path_factory):
    tok = tiny_tokenizer()
    clf = IntentClassifier(tiny_encoder(tok), tok, list(INTENTS), temperature=1.5,
                           threshold=0.4, max_length=MAX_LENGTH)
    return clf.save(tmp_path_factory.mktemp("serve") / "encoder")


@pytest.fixture(scope="session")
def bilstm_dir(tmp_path_factory):
    tok = tiny_tokenizer()
    torch.manual_seed(1)
    model = BiLSTMClassifier(tok.vocab_size, len(INTENTS), embed_dim=16, hidden_size=16,
                             pad_token_id=tok.pad_token_id).eval()
    clf = IntentClassifier(model, tok, list(INTENTS), max_length=MAX_LENGTH)
    return clf.save(tmp_path_factory.mktemp("serve") / "bilstm")


@pytest.fixture(scope="module")
def client(encoder_dir):
    from fastapi.testclient import TestClient

    from headwise.serve import ServeConfig, create_app

    app = create_app(ServeConfig(model_dir=str(encoder_dir), max_texts=8, max_text_chars=400,
                                 max_body_bytes=4096, max_wait_ms=2.0))
    with TestClient(app) as c:
        wait_ready(c)
        yield c


@pytest.fixture(scope="session")
def other_encoder_dir(tmp_path_factory):
    """A second tiny Transformer on the same intents, with other weights and a flatter
    calibration: its answers differ from ``encoder_dir``'s on every text."""
    tok = tiny_tokenizer()
    clf = IntentClassifier(tiny_encoder(tok, seed=7), tok, list(INTENTS), temperature=6.0,
                           threshold=0.4, max_length=MAX_LENGTH)
    return clf.save(tmp_path_factory.mktemp("serve") / "other")
