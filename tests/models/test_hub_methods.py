"""Hugging Face's method names on headwise models and tokenizers: ``save_pretrained`` and
``from_pretrained`` write and read the same files as the functions, bit-exact."""

from __future__ import annotations

import pytest
import torch

import headwise
from headwise.models import BiLSTMClassifier, EncoderClassifier, ModelConfig, build_model
from headwise.text import train_tokenizer

TEXTS = ["i lost my card", "send money to john", "what is my balance", "card stolen today"]


def _pair(model_type="encoder_classifier"):
    tok = train_tokenizer(TEXTS * 5, kind="wordpiece", vocab_size=80)
    extra = dict(lstm_embed_dim=8, lstm_hidden=6) if model_type == "bilstm" else {}
    config = ModelConfig(model_type=model_type, vocab_size=tok.vocab_size, d_model=16,
                         num_layers=1, num_heads=2, d_ff=32, max_position=32, num_labels=3,
                         pad_token_id=tok.pad_token_id, **extra)
    torch.manual_seed(0)
    return build_model(config).eval(), tok


@pytest.mark.parametrize("model_type, cls", [("encoder_classifier", EncoderClassifier),
                                             ("bilstm", BiLSTMClassifier)])
def test_model_and_tokenizer_methods_round_trip_bit_exact(model_type, cls, tmp_path):
    model, tok = _pair(model_type)
    assert model.save_pretrained(tmp_path) == tmp_path
    assert tok.save_pretrained(tmp_path) == tmp_path
    again = cls.from_pretrained(tmp_path)
    tok2 = type(tok).from_pretrained(tmp_path)
    batch, batch2 = tok(TEXTS), tok2(TEXTS)
    assert torch.equal(batch["input_ids"], batch2["input_ids"])
    assert not again.training
    with torch.no_grad():
        want = model(input_ids=batch["input_ids"],
                     attention_mask=batch["attention_mask"].bool())["logits"]
        got = again(input_ids=batch2["input_ids"],
                    attention_mask=batch2["attention_mask"].bool())["logits"]
    assert torch.equal(want, got)
    # the same directory is what headwise.from_pretrained reads
    m3, _ = headwise.from_pretrained(tmp_path)
    assert type(m3) is cls


def test_from_pretrained_refuses_another_kind_of_model(tmp_path):
    model, _ = _pair("bilstm")
    model.save_pretrained(tmp_path)
    with pytest.raises(TypeError, match="holds a BiLSTMClassifier, not a EncoderClassifier"):
        EncoderClassifier.from_pretrained(tmp_path)
