"""``/v1/explain``: the attention it returns against the model's own projections, the
attribution of every token with its completeness, a BiLSTM answered without attention
fields, a compound model explained per answered intent, and a TF-IDF model by its
features' weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient
from serve_helpers import wait_ready

from headwise.inspect import explain
from headwise.intent.classifier import IntentClassifier
from headwise.intent.compound.classifier import CompoundClassifier
from headwise.intent.compound.thresholds import Thresholds
from headwise.models import ModelConfig
from headwise.models.joint import JointIntentSlotModel
from headwise.serve import ServeConfig, create_app


def test_explanation_attention_matches_the_models_own(encoder_dir):
    clf = IntentClassifier.load(encoder_dir)
    text = "what is my balance"
    ex = explain(clf, text)
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
        np.testing.assert_allclose(ex.attention[0], torch.softmax(scores, -1)[0].numpy(),
                                   atol=1e-5)
    np.testing.assert_allclose(ex.logits, clf.logits([text])[0], atol=1e-5)
    assert [t[0] for t in ex.tokens[1:-1]] == clf.tokenizer.tokenize(text)


def _check_attribution(body):
    tokens, c = body["tokens"], body["completeness"]
    assert all((t["attribution"] is None) == t["special"] for t in tokens)
    total = sum(t["attribution"] for t in tokens if t["attribution"] is not None)
    assert total == pytest.approx(c["sum"], abs=1e-9)
    assert c["error"] == pytest.approx(c["sum"] - c["delta"], abs=1e-9)
    assert c["within_tolerance"] and c["relative_error"] <= c["tolerance"] == 0.01
    assert body["explained"][0]["completeness"] == c
    assert body["explained"][0]["attribution"] == [t["attribution"] for t in tokens]


def test_attribution_on_the_transformer_equals_the_library(client, encoder_dir):
    text = "transfer 50 pounds to john"
    body = client.post("/v1/explain", json={"text": text}).json()
    _check_attribution(body)
    want = explain(IntentClassifier.load(encoder_dir), text)
    np.testing.assert_allclose([t["attribution"] or 0.0 for t in body["tokens"]],
                               want.attributions[0].scores, atol=1e-6)
    assert body["completeness"]["intent"] == body["prediction"]["top_k"][0]["intent"]
    assert body["num_layers"] == 2 and body["rollout"] is not None


def test_a_bilstm_is_explained_without_attention(bilstm_dir):
    with TestClient(create_app(ServeConfig(model_dir=str(bilstm_dir)))) as c:
        wait_ready(c)
        r = c.post("/v1/explain", json={"text": "i lost my card"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["attention"] is None and body["rollout"] is None
    assert body["num_layers"] is None and body["num_heads"] is None
    _check_attribution(body)
    assert body["completeness"]["method"] == "integrated_gradients"


def test_a_compound_model_is_explained_per_answered_intent(tmp_path):
    from tiny_models import tiny_tokenizer

    tok = tiny_tokenizer()
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=tok.vocab_size, d_model=16, num_layers=1, num_heads=2,
                      d_ff=32, num_labels=3, labels=["a", "b", "c"], max_position=64,
                      pad_token_id=tok.pad_token_id, dropout=0.0,
                      model_type="joint_intent_slot", multi_label=True,
                      slot_tags=["O", "B-amount", "I-amount"])
    model = JointIntentSlotModel(cfg).eval()
    with torch.no_grad():
        model.classifier.weight.normal_(0, 1.0)
    text = "i lost my card"
    clf = CompoundClassifier(model, tok, ["a", "b", "c"], max_length=12)
    probs = clf.analyse([text])[0][0]
    threshold = float(np.sort(probs)[1]) - 1e-6  # two intents pass
    clf.thresholds = Thresholds(threshold)
    directory = clf.save(tmp_path / "compound")
    with TestClient(create_app(ServeConfig(model_dir=str(directory)))) as c:
        wait_ready(c)
        r = c.post("/v1/explain", json={"text": text})
    assert r.status_code == 200, r.text
    body = r.json()
    answered = [i["intent"] for i in body["prediction"]["intents"]]
    assert len(answered) == 2
    assert [e["intent"] for e in body["explained"]] == answered
    for e in body["explained"]:
        assert e["completeness"]["within_tolerance"]
    _check_attribution(body)
    assert body["num_layers"] == 1 and body["num_heads"] == 2


def test_a_long_text_is_explained_as_the_service_answered_it(chatter_clf, tmp_path):
    """chunk_max (auto): the prediction is /v1/predict's, the explanation the kept window's
    (offsets in the whole text, window given); chunk (the mean of the windows): 409."""
    from tiny_long_text import REQUEST, planted

    from headwise.intent.inference import load_predictor

    model = chatter_clf.save(tmp_path / "model")
    text = planted("end")
    with TestClient(create_app(ServeConfig(model_dir=str(model)))) as c:
        wait_ready(c)
        predicted = c.post("/v1/predict", json={"text": text}).json()["predictions"][0]
        r = c.post("/v1/explain", json={"text": text})
        short = c.post("/v1/explain", json={"text": REQUEST}).json()
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["prediction"] == predicted
    assert predicted["intents"][0]["intent"] == body["completeness"]["intent"] == "card_lost"
    _check_attribution(body)
    want = explain(load_predictor(model, runtime="torch"), text)
    assert want.long_text == predicted["long_text"] and predicted["long_text"]["chunk"]
    assert body["window"] == {"start": want.window[0], "end": want.window[1], "skipped": None}
    assert [(t["token"], t["start"], t["end"]) for t in body["tokens"]] == \
        [t[:3] for t in want.tokens]
    np.testing.assert_allclose([t["attribution"] or 0.0 for t in body["tokens"]],
                               want.attributions[0].scores, atol=1e-6)
    for t in body["tokens"]:
        if not t["special"]:
            assert text[t["start"]:t["end"]] == t["token"].removeprefix("##")
    assert short["window"] is None and short["prediction"]["long_text"] is None
    with TestClient(create_app(ServeConfig(model_dir=str(model), long_text="chunk"))) as c:
        wait_ready(c)
        r = c.post("/v1/explain", json={"text": text})
        assert c.post("/v1/explain", json={"text": REQUEST}).status_code == 200
    assert r.status_code == 409
    assert r.json()["error"]["type"] == "unexplained_long_text"
    assert "mean of its" in r.json()["error"]["message"]
