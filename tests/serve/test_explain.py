"""``/v1/explain``'s explain_text against the model's own attention, and its refusal of a
model without attention heads."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from headwise.inspect import NoAttentionError
from headwise.intent.classifier import IntentClassifier
from headwise.serve import explain_text


def test_explain_text_matches_the_models_own_attention(encoder_dir):
    clf = IntentClassifier.load(encoder_dir)
    text = "what is my balance"
    ex = explain_text(clf, text)
    batch = clf.tokenizer([text])
    n = batch["input_ids"].shape[1]
    assert ex.attention.shape == (2, 4, n, n) and not ex.truncated
    # recompute layer 0's weights from its projections: softmax(q k^T / sqrt(d))
    model = clf.model
    with torch.no_grad():
        x = model.encoder.embeddings(batch["input_ids"])
        layer = model.encoder.layers[0]
        h = layer.norm1(x) if layer.norm_first else x
        q, k, _ = layer.attn.in_proj(h).view(1, n, 3, 4, 8).unbind(2)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / 8 ** 0.5
        np.testing.assert_allclose(ex.attention[0].numpy(),
                                   torch.softmax(scores, -1)[0].numpy(), atol=1e-5)
    np.testing.assert_allclose(ex.logits, clf.logits([text])[0], atol=1e-5)
    assert [t[0] for t in ex.tokens[1:-1]] == clf.tokenizer.tokenize(text)


def test_explain_text_refuses_a_bilstm(bilstm_dir):
    with pytest.raises(NoAttentionError, match="no attention heads"):
        explain_text(IntentClassifier.load(bilstm_dir), "hello")
