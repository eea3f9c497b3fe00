"""Attention rollout (``headwise.inspect.rollout_matrix``, which /v1/explain uses) against a
hand-computed example, its deprecated tensor adapter, and explain_text against capture."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from headwise.inspect import rollout_matrix
from headwise.intent.classifier import IntentClassifier
from headwise.serve import NoAttentionError, explain_text


def attention_rollout(weights, *, add_residual=True):
    return torch.from_numpy(rollout_matrix(weights, 0.5 if add_residual else None))


def test_rollout_by_hand():
    # layer 1: two heads whose mean is [[.5, .5], [0, 1]]; layer 2: the mean [[1, 0], [.5, .5]]
    w1 = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [0.0, 1.0]]])
    w2 = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [1.0, 0.0]]])
    # + I and renormalised: A1 = [[.75, .25], [0, 1]], A2 = [[1, 0], [.25, .75]]
    # rollout = A2 @ A1 = [[.75, .25], [.1875, .8125]]
    out = attention_rollout([w1, w2])
    assert out.dtype == torch.float64
    np.testing.assert_allclose(out.numpy(), [[0.75, 0.25], [0.1875, 0.8125]], atol=1e-12)
    np.testing.assert_allclose(attention_rollout(torch.stack([w1, w2])).numpy(), out.numpy())
    # without the residual: the plain product of the head means
    plain = attention_rollout([w1, w2], add_residual=False)
    np.testing.assert_allclose(plain.numpy(), [[0.5, 0.5], [0.25, 0.75]], atol=1e-12)


def test_rollout_rows_stay_distributions_and_one_layer_is_its_own():
    torch.manual_seed(0)
    w = torch.softmax(torch.randn(3, 4, 6, 6), -1)
    out = attention_rollout(w)
    np.testing.assert_allclose(out.sum(-1).numpy(), 1.0, atol=1e-12)
    one = attention_rollout(w[:1])
    want = (w[0].double().mean(0) + torch.eye(6, dtype=torch.float64)) / 2
    np.testing.assert_allclose(one.numpy(), want.numpy(), atol=1e-12)
    with pytest.raises(ValueError, match="at least one layer"):
        attention_rollout([])
    with pytest.raises(ValueError, match="layer 1"):
        attention_rollout([w[0], w[1, :, :5, :5]])


def test_the_deprecated_tensor_adapter_warns_and_equals_rollout_matrix():
    from headwise.serve import attention_rollout as deprecated
    from headwise.serve.explain import attention_modules

    torch.manual_seed(1)
    w = torch.softmax(torch.randn(2, 3, 5, 5), -1)
    with pytest.warns(DeprecationWarning, match="rollout_matrix"):
        old = deprecated(w)
    np.testing.assert_array_equal(old.numpy(), rollout_matrix(w.numpy()))
    with pytest.warns(DeprecationWarning, match="attention_layers"), \
            pytest.raises(NoAttentionError, match="Linear"):
        attention_modules(torch.nn.Linear(2, 2))


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
