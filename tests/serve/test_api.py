"""Every endpoint through FastAPI's test client, against the classifier's own answers."""

from __future__ import annotations

import json

import numpy as np
import pytest
from answers import confidence_of, intent_of
from tiny_corpus import INTENTS
from tiny_models import MAX_LENGTH, TEXTS

from headwise.intent.classifier import IntentClassifier
from headwise.intent.inference.bucketing import window_length
from headwise.serve.schemas import TEXT_PATTERN


@pytest.fixture(scope="module")
def clf(encoder_dir):
    return IntentClassifier.load(encoder_dir)


def test_predict_many_equals_classifier_predict(client, clf):
    texts = TEXTS[:6]
    r = client.post("/v1/predict", json={"texts": texts, "top_k": 2})
    assert r.status_code == 200
    body = r.json()
    assert body["runtime"] == "onnx" and body["model"] == "encoder"
    assert [p["text"] for p in body["predictions"]] == texts
    predictor = clf.predictor()
    answers, notes = predictor.predictions(texts, top_k=2)
    for got, want, note, item in zip(body["predictions"], answers, notes,
                                     predictor.encode(texts), strict=True):
        assert intent_of(got) == want.intent and got["out_of_scope"] == want.out_of_scope
        assert confidence_of(got) == pytest.approx(want.confidence, abs=1e-6)
        assert [k["intent"] for k in got["top_k"]] == [k for k, _ in want.top_k]
        n = int(clf.tokenizer([got["text"]], max_length=None)["attention_mask"].sum())
        # the default policy: a long text read in windows, the most confident answering
        assert (note is None) == (n <= MAX_LENGTH)
        if note is not None:
            assert note == {"policy": "chunked", "tokens": n, "max_length": MAX_LENGTH,
                            "chunks": len(item.chunks), "window": window_length(None, MAX_LENGTH),
                            "stride": predictor.chunk_stride, "pooling": "max_confidence",
                            "chunk": note["chunk"], "span": None}
            assert 1 <= note["chunk"] <= len(item.chunks)
        assert got["long_text"] == note


def test_predict_one_text_and_threshold_override(client, clf):
    r = client.post("/v1/predict", json={"texts": "i lost my card"})
    (p,) = r.json()["predictions"]
    assert len(p["top_k"]) == 3  # the service's default top_k, capped at 3 intents
    assert sorted(k["intent"] for k in p["top_k"]) == sorted(INTENTS)
    assert sum(k["confidence"] for k in p["top_k"]) == pytest.approx(1.0)
    # threshold 1.0: every answer is out of scope, the confidence is still reported
    r = client.post("/v1/predict", json={"texts": ["i lost my card"], "threshold": 1.0})
    (q,) = r.json()["predictions"]
    assert q["out_of_scope"] and intent_of(q) == "out_of_scope"
    assert confidence_of(q) == pytest.approx(confidence_of(p))
    r = client.post("/v1/predict", json={"texts": ["i lost my card"], "threshold": 0})
    assert not r.json()["predictions"][0]["out_of_scope"]
    want = clf.predict(["i lost my card"])[0]
    assert p["out_of_scope"] == want.out_of_scope  # the saved threshold (0.4) by default


def test_explain_gives_per_head_attention_and_rollout(client, clf):
    text = "transfer 50 pounds to john"
    r = client.post("/v1/explain", json={"text": text})
    assert r.status_code == 200
    body = r.json()
    tokens = body["tokens"]
    ids = clf.tokenizer([text])["input_ids"][0].tolist()
    assert len(tokens) == len(ids)
    assert tokens[0]["special"] and tokens[-1]["special"] and tokens[0]["start"] is None
    for t in tokens[1:-1]:  # each token's span is where it came from in the text
        piece = text[t["start"]:t["end"]].lower()
        assert piece == t["token"].removeprefix("##") or t["token"] == "[UNK]"
    att = np.array(body["attention"])
    assert att.shape == (2, 4, len(ids), len(ids)) == (body["num_layers"], body["num_heads"],
                                                        len(ids), len(ids))
    np.testing.assert_allclose(att.sum(-1), 1.0, atol=1e-5)
    # rollout recomputed here in float64 from the returned weights
    roll = np.eye(len(ids))
    for layer in att:
        a = layer.mean(0) + np.eye(len(ids))
        roll = (a / a.sum(-1, keepdims=True)) @ roll
    np.testing.assert_allclose(body["rollout"]["cls"], roll[0], atol=1e-5)
    np.testing.assert_allclose(body["rollout"]["mean"], roll[1:-1].mean(0), atol=1e-5)
    want = clf.predict([text])[0]
    assert intent_of(body["prediction"]) == want.intent
    assert confidence_of(body["prediction"]) == pytest.approx(want.confidence, abs=1e-5)


def test_health_ready_and_metrics(client):
    assert client.get("/healthz").json() == {"status": "ok", "model": "encoder",
                                             "runtime": "onnx"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"
    client.post("/v1/predict", json={"texts": ["what is my balance", "i lost my card"]})
    client.post("/v1/predict", json={"texts": []})
    m = client.get("/metrics")
    assert m.status_code == 200 and m.headers["content-type"].startswith("text/plain")
    text = m.text
    assert 'headwise_requests_total{endpoint="/v1/predict",method="POST",status="200"}' in text
    assert 'headwise_requests_total{endpoint="/v1/predict",method="POST",status="422"}' in text
    assert 'headwise_request_latency_seconds_bucket{endpoint="/v1/predict",le="0.05"}' in text
    assert "headwise_batch_size_bucket" in text and "headwise_ready 1.0" in text
    count = [ln for ln in text.splitlines() if ln.startswith("headwise_batch_size_sum")]
    assert float(count[0].split()[-1]) >= 2  # the two texts went through a batch


def test_not_ready_answers_503(client):
    state = client.app.state.serve
    state.ready = False
    try:
        r = client.get("/readyz")
        assert r.status_code == 503
        assert r.json() == {"status": "starting", "model": "encoder", "runtime": "onnx"}
        r = client.post("/v1/predict", json={"texts": "hello"})
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
        assert r.json()["error"]["type"] == "not_ready"
    finally:
        state.ready = True


def test_openapi_schema_comes_from_the_pydantic_models(client):
    schema = client.get("/openapi.json").json()
    assert {"/v1/predict", "/v1/explain", "/healthz", "/readyz", "/metrics"} <= set(
        schema["paths"])
    comps = schema["components"]["schemas"]
    assert {"PredictRequest", "PredictResponse", "ExplainResponse", "ErrorResponse"} <= set(
        comps)
    assert comps["PredictRequest"]["additionalProperties"] is False
    post = schema["paths"]["/v1/predict"]["post"]
    assert {"200", "400", "413", "422", "503"} <= set(post["responses"])


def test_text_or_texts_on_both_endpoints(client):
    texts = client.post("/v1/predict", json={"texts": "i lost my card", "top_k": 2}).json()
    text = client.post("/v1/predict", json={"text": "i lost my card", "top_k": 2}).json()
    listed = client.post("/v1/predict", json={"texts": ["i lost my card"], "top_k": 2}).json()
    assert texts == text == listed and len(text["predictions"]) == 1
    one = client.post("/v1/explain", json={"text": "i lost my card"})
    for body in ({"texts": "i lost my card"}, {"texts": ["i lost my card"]}):
        r = client.post("/v1/explain", json=body)
        assert r.status_code == 200 and r.json() == one.json()


def test_openapi_schema_declares_what_the_service_enforces(client):
    comps = client.get("/openapi.json").json()["components"]["schemas"]

    def strings(node):
        if isinstance(node, dict):
            if node.get("type") == "string":
                yield node
            for v in node.values():
                yield from strings(v)
        elif isinstance(node, list):
            for v in node:
                yield from strings(v)

    for name, fields in (("PredictRequest", ("text", "texts")),
                         ("ExplainRequest", ("text", "texts"))):
        props = comps[name]["properties"]
        for field in fields:
            found = list(strings(props[field]))
            assert found, (name, field)
            for s in found:  # the fixture's service: 400 characters a text, 8 texts
                assert s["minLength"] == 1 and s["pattern"] == TEXT_PATTERN
                assert s["maxLength"] == 400
        # exactly one of the two, neither null (no null branch, no default)
        assert comps[name]["oneOf"] == [{"required": ["text"]}, {"required": ["texts"]}]
        assert "required" not in comps[name]
        for field in fields:
            assert "default" not in props[field] and "null" not in json.dumps(props[field])
    lists = [b for b in comps["PredictRequest"]["properties"]["texts"]["anyOf"]
             if b.get("type") == "array"]
    assert lists[0]["maxItems"] == 8 and lists[0]["minItems"] == 1
    explain_lists = [b for b in comps["ExplainRequest"]["properties"]["texts"]["anyOf"]
                     if b.get("type") == "array"]
    assert explain_lists[0]["maxItems"] == 1
    # what the schema allows, the service accepts
    assert client.post("/v1/predict", json={"text": "x" * 400}).status_code == 200
    assert client.post("/v1/predict", json={"texts": ["ok"] * 8}).status_code == 200
    assert client.get("/healthz").status_code == 200


def test_docs_pages_load_their_scripts_from_the_service(client):
    pytest.importorskip("fastapi_offline")
    for page, assets in (("/docs", ("swagger-ui-bundle.js", "swagger-ui.css")),
                         ("/redoc", ("redoc.standalone.js",))):
        r = client.get(page)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        html = r.text
        assert "/openapi.json" in html
        assert "http://" not in html and "https://" not in html  # no CDN, no web font
        for name in (*assets, "favicon.png"):
            assert f"/docs/assets/{name}" in html
            got = client.get(f"/docs/assets/{name}")
            assert got.status_code == 200 and len(got.content) > 1000
    assert client.get("/docs/assets/swagger-ui-bundle.js").headers["content-type"] in (
        "text/javascript; charset=utf-8", "application/javascript")
    assert client.get("/docs/assets/..%2Fcore.py").status_code == 404
    assert client.get("/docs/assets/index.html").status_code == 404
    paths = client.get("/openapi.json").json()["paths"]
    assert not any(p.startswith(("/docs", "/redoc")) for p in paths)


def test_without_the_docs_files_there_are_no_pages(encoder_dir, monkeypatch):
    from fastapi.testclient import TestClient

    from headwise.serve import ServeConfig, docs_pages
    from headwise.serve.app import create_app

    monkeypatch.setattr(docs_pages, "docs_assets", lambda: None)
    with TestClient(create_app(ServeConfig(model_dir=str(encoder_dir), warmup=False))) as c:
        assert c.get("/docs").status_code == 404 and c.get("/redoc").status_code == 404
        assert c.get("/openapi.json").status_code == 200
