"""The service honours its long-text policy: each policy's answer and ``long_text`` note
on a planted long message equal the predictor's, and ``auto`` is ``chunk_max`` for a
network."""

from __future__ import annotations

from answers import intent_of
from serve_helpers import wait_ready
from tiny_long_text import REQUEST, planted

from headwise.intent.inference import load_predictor


def test_the_service_honours_its_policy(chatter_clf, tmp_path):
    from fastapi.testclient import TestClient

    from headwise.serve import ServeConfig, create_app

    model = chatter_clf.save(tmp_path / "model")
    text = planted("end")
    got = {}
    for policy in ("auto", "truncate", "head_tail", "chunk", "chunk_max"):
        with TestClient(create_app(ServeConfig(model_dir=str(model), long_text=policy))) as c:
            wait_ready(c)
            body = c.post("/v1/predict", json={"texts": [text, REQUEST]}).json()
            metrics = c.get("/metrics").text
        got[policy] = body["predictions"][0]
        assert body["predictions"][1]["long_text"] is None
        want = load_predictor(model, runtime="torch", long_text=policy).predict([text])[0]
        assert got[policy]["long_text"] == want["long_text"]
        assert intent_of(got[policy]) == intent_of(want)
        assert f'headwise_texts_total{{long_text="{want["long_text"]["policy"]}"}} 1.0' \
            in metrics
    assert got["auto"] == got["chunk_max"]
    assert intent_of(got["chunk_max"]) == "card_lost" and got["chunk_max"]["long_text"]["chunk"]
    assert intent_of(got["truncate"]) != "card_lost"
    assert got["truncate"]["long_text"]["chunks"] == 1
    assert got["chunk"]["long_text"]["pooling"] == "mean"
    assert got["chunk"]["long_text"]["chunk"] is None
    assert intent_of(got["head_tail"]) == "card_lost"
