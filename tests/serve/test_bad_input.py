"""Every class of bad input gets a 4xx with a clear message, never a 5xx; a bad model
directory is refused at start-up."""

from __future__ import annotations

import json
import shutil

import pytest
from answers import confidence_of
from fastapi.testclient import TestClient
from serve_helpers import wait_ready
from tiny_models import MAX_LENGTH

from headwise.cli import main
from headwise.intent.classifier import IntentClassifier
from headwise.intent.inference import load_predictor
from headwise.models.io import UnsafeCheckpointError
from headwise.serve import ServeConfig, create_app

JSON = {"content-type": "application/json"}
LONG = "send money to my friend and then transfer fifty pounds to my savings account now"


def _error(r, status: int, kind: str) -> str:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["status"] == status and err["type"] == kind
    return err["message"]


def test_malformed_json_is_400(client):
    msg = _error(client.post("/v1/predict", content=b'{"texts": ["a",', headers=JSON), 400,
                 "malformed_json")
    assert "not valid JSON" in msg


def test_invalid_utf8_is_400(client):
    msg = _error(client.post("/v1/predict", content=b'{"texts": "caf\xe9"}', headers=JSON),
                 400, "invalid_utf8")
    assert "not valid UTF-8" in msg and "0xe9" in msg


def test_non_json_body_is_415(client):
    r = client.post("/v1/predict", content=b"texts=hello",
                    headers={"content-type": "application/x-www-form-urlencoded"})
    assert "application/json" in _error(r, 415, "unsupported_media_type")


@pytest.mark.parametrize("body, where", [
    ({"texts": 3}, "texts"),
    ({"texts": ["ok", 3]}, "texts.1"),
    ({"texts": "ok", "top_k": "3"}, "top_k"),
    ({"texts": "ok", "top_k": 0}, "top_k"),
    ({"texts": "ok", "threshold": 1.5}, "threshold"),
    ({"texts": "ok", "colour": "red"}, "colour"),
    ({"text": ["ok"]}, "text"),
    ({"text": "ok", "texts": "ok"}, "body"),
    ({}, "body"),
    ({"top_k": 2}, "body"),
    ([], "body"),
])
def test_wrong_types_and_fields_are_422(client, body, where):
    msg = _error(client.post("/v1/predict", json=body), 422, "validation_error")
    assert msg.startswith(f"{where}:") or f"; {where}:" in msg


@pytest.mark.parametrize("texts, where", [("", "texts"), ("   \n", "texts"),
                                          (["fine", " "], "texts[1]")])
def test_empty_text_is_422(client, texts, where):
    msg = _error(client.post("/v1/predict", json={"texts": texts}), 422, "empty_text")
    assert msg.startswith(where)
    assert _error(client.post("/v1/predict", json={"texts": []}), 422, "validation_error")
    if isinstance(texts, str):  # the same text as `text`, on both endpoints
        for path in ("/v1/predict", "/v1/explain"):
            msg = _error(client.post(path, json={"text": texts}), 422, "empty_text")
            assert msg.startswith("text is empty")


def test_text_and_texts_both_or_neither_is_422_saying_so(client):
    for path in ("/v1/predict", "/v1/explain"):
        both = _error(client.post(path, json={"text": "a", "texts": "b"}), 422,
                      "validation_error")
        assert "give either text (one text) or texts" in both and "not both" in both
        neither = _error(client.post(path, json={}), 422, "validation_error")
        assert "give either text" in neither and "not both" not in neither
    msg = _error(client.post("/v1/explain", json={"texts": ["a", "b"]}), 422,
                 "validation_error")
    assert msg.startswith("texts:")


def test_too_many_texts_is_422(client):
    msg = _error(client.post("/v1/predict", json={"texts": ["hi"] * 9}), 422, "too_many_texts")
    assert "9 texts" in msg and "limit of 8" in msg


def test_text_over_the_character_limit_is_422(client):
    msg = _error(client.post("/v1/predict", json={"texts": ["ok", "x" * 401]}), 422,
                 "text_too_long")
    assert msg == "texts[1] has 401 characters, over the limit of 400"
    _error(client.post("/v1/explain", json={"text": "x" * 401}), 422, "text_too_long")


def test_unpaired_surrogate_is_422(client):
    r = client.post("/v1/predict", content=b'{"texts": ["ok", "a\\ud800b"]}', headers=JSON)
    assert "unpaired surrogate" in _error(r, 422, "invalid_text")


def test_oversized_body_is_413_with_or_without_content_length(client):
    big = json.dumps({"texts": ["words " * 90] * 8}).encode()
    assert len(big) > 4096
    msg = _error(client.post("/v1/predict", content=big, headers=JSON), 413,
                 "payload_too_large")
    assert "limit of 4096 bytes" in msg

    def stream():  # chunked transfer: no Content-Length, the limit applies while reading
        for i in range(0, len(big), 1000):
            yield big[i:i + 1000]

    _error(client.post("/v1/predict", content=stream(), headers=JSON), 413,
           "payload_too_large")


def test_unknown_path_and_method(client):
    _error(client.get("/v2/predict"), 404, "not_found")
    _error(client.get("/v1/predict"), 405, "method_not_allowed")


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics"])
@pytest.mark.parametrize("method", ["PUT", "POST", "PATCH"])
def test_a_body_method_on_a_get_endpoint_is_405_not_415(client, path, method):
    # the body checks run only where a body is read: routing answers first
    for headers in ({}, {"content-type": "text/plain"}, JSON):
        r = client.request(method, path, content=b"hello", headers=headers)
        _error(r, 405, "method_not_allowed")
    _error(client.request(method, "/v2/nothing", content=b"x"), 404, "not_found")
    _error(client.put("/v1/predict", content=b"x"), 405, "method_not_allowed")


def test_long_text_policies_say_what_they_did(encoder_dir):
    clf = IntentClassifier.load(encoder_dir)
    n = int(clf.tokenizer([LONG], max_length=None)["attention_mask"].sum())
    assert n > MAX_LENGTH
    for policy, expected in (("truncate", "truncated"), ("head_tail", "head_tail"),
                             ("chunk", "chunked"), ("chunk_max", "chunked"),
                             ("chunk_in_scope", "chunked"), ("chunk_span", "chunked")):
        app = create_app(ServeConfig(model_dir=str(encoder_dir), long_text=policy))
        with TestClient(app) as c:
            wait_ready(c)
            p = c.post("/v1/predict", json={"texts": [LONG, "hi"]}).json()["predictions"]
        assert p[1]["long_text"] is None
        info = p[0]["long_text"]
        assert info["policy"] == expected and info["tokens"] == n
        assert info["max_length"] == MAX_LENGTH
        assert (info["chunks"] == 1) == (policy in ("truncate", "head_tail"))
        assert info["pooling"] == {"chunk": "mean", "chunk_max": "max_confidence",
                                   "chunk_in_scope": "max_in_scope",
                                   "chunk_span": "in_scope_span"}.get(policy)
        assert (info["chunk"] is not None) == (policy in ("chunk_max", "chunk_in_scope",
                                                          "chunk_span"))
        # what the library's predictor with the same policy answers (the service may run
        # onnxruntime: float32 within 1e-4)
        [want], [note] = load_predictor(clf, runtime="torch", long_text=policy).predictions(
            [LONG])
        assert confidence_of(p[0]) == pytest.approx(want.confidence, abs=1e-4)
        assert info == note
    app = create_app(ServeConfig(model_dir=str(encoder_dir), long_text="reject"))
    with TestClient(app) as c:
        wait_ready(c)
        msg = _error(c.post("/v1/predict", json={"texts": ["hi", LONG]}), 422, "text_too_long")
    assert msg == f"texts[1] has {n} tokens, over the model's maximum length of {MAX_LENGTH}"


def test_pickle_file_is_refused_at_startup(encoder_dir, tmp_path, capsys):
    bad = tmp_path / "with_pickle"
    shutil.copytree(encoder_dir, bad)
    (bad / "pytorch_model.bin").write_bytes(b"not really a pickle")
    with pytest.raises(UnsafeCheckpointError, match="refusing to load pickle"):
        create_app(ServeConfig(model_dir=str(bad)))
    assert main(["serve", str(bad)]) == 1  # exits before starting a server
    assert "pytorch_model.bin" in capsys.readouterr().err


def test_mismatched_config_is_refused_at_startup(encoder_dir, tmp_path, capsys):
    bad = tmp_path / "mismatch"
    shutil.copytree(encoder_dir, bad)
    cfg = json.loads((bad / "config.json").read_text())
    cfg["d_ff"] = 128
    (bad / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="do not match the config"):
        create_app(ServeConfig(model_dir=str(bad)))
    assert main(["serve", str(bad)]) == 1
    assert "shape mismatches" in capsys.readouterr().err
    assert main(["serve", str(tmp_path / "missing")]) == 1
    assert "no model directory" in capsys.readouterr().err
