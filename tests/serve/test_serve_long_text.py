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
    for policy in ("auto", "truncate", "head_tail", "chunk", "chunk_max", "chunk_span"):
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
    assert intent_of(got["chunk_span"]) == "card_lost"
    assert got["chunk_span"]["long_text"]["pooling"] == "in_scope_span"


def test_the_service_reads_windows_as_wide_as_its_setting(chatter_clf, tmp_path):
    """``chunk_length``: the service's windows are that wide (tokens, or a fraction of the
    maximum length), its note says so, and its answers are the predictor's; a width the
    model cannot take is refused at start."""
    import pytest
    from fastapi.testclient import TestClient

    from headwise.serve import ServeConfig, create_app

    model = chatter_clf.save(tmp_path / "model")
    text = planted("middle")
    for policy, chunk_length, window in (("auto", 8, 8), ("chunk_in_scope", 0.75, 9),
                                         ("chunk", 10, 10)):
        config = ServeConfig(model_dir=str(model), long_text=policy, chunk_length=chunk_length)
        with TestClient(create_app(config)) as c:
            wait_ready(c)
            got = c.post("/v1/predict", json={"texts": [text]}).json()["predictions"][0]
        want = load_predictor(model, runtime="torch", long_text=policy,
                              chunk_length=chunk_length).predict([text])[0]
        assert got["long_text"] == want["long_text"]
        assert got["long_text"]["window"] == window
        assert intent_of(got) == intent_of(want)
        if policy == "auto":  # chunk_max: the request, found in an 8-token window
            assert intent_of(got) == "card_lost" and got["long_text"]["chunk"]
    for chunk_length, message in ((13, "wider than the model's maximum length of 12"),
                                  (0.5, "window of 6 tokens, under the 8")):
        with pytest.raises(ValueError, match=message):
            create_app(ServeConfig(model_dir=str(model), chunk_length=chunk_length))
