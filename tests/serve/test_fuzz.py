"""Property-based fuzz of the service: any JSON, any bytes, any text -> never a 5xx; and,
from the OpenAPI document, every endpoint's request body (valid ones answered, ones a change
away refused with a 4xx naming the problem) and the API-key headers of every endpoint."""

from __future__ import annotations

import json

import pytest
from answers import confidence_of
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schema_strategies import one_change, request_schema, valid
from serve_helpers import wait_ready

from headwise.serve import ServeConfig, create_app
from headwise.serve.access import UNAUTHORIZED

JSON_HEADERS = {"content-type": "application/json"}
FUZZ = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])

# texts of every kind: empty, spaces, control characters, emoji, CJK, lone surrogates
texts = st.text(st.characters(codec=None), max_size=60) | st.sampled_from(
    ["", " ", "\x00", "\ud800", "🙂🙂", "我想提前还款", "[CLS] [SEP] [PAD]", "a" * 500])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=10)
# bodies shaped like the schema, with each field sometimes of the wrong type
requests = st.fixed_dictionaries(
    {"texts": texts | st.lists(texts, max_size=10) | json_values},
    optional={"top_k": st.integers(-5, 2000) | json_values,
              "threshold": st.floats(-1, 2, allow_nan=False) | json_values,
              "extra": json_values})


def _check(r) -> None:
    assert r.status_code < 500, r.text
    body = r.json()
    if r.status_code == 200:
        assert body["predictions"]
        for p in body["predictions"]:
            assert 0.0 <= confidence_of(p) <= 1.0 and p["top_k"]
    else:
        assert body["error"]["status"] == r.status_code and body["error"]["message"]


@FUZZ
@given(body=requests)
def test_schema_shaped_bodies_never_5xx(client, body):
    raw = json.dumps(body, ensure_ascii=True).encode()  # \\ud800 survives as an escape
    r = client.post("/v1/predict", content=raw, headers=JSON_HEADERS)
    _check(r)
    if r.status_code == 200:
        sent = body["texts"]
        assert len(r.json()["predictions"]) == (1 if isinstance(sent, str) else len(sent))


@FUZZ
@given(body=json_values)
def test_any_json_never_5xx(client, body):
    _check(client.post("/v1/predict", content=json.dumps(body).encode(),
                       headers=JSON_HEADERS))


@FUZZ
@given(raw=st.binary(max_size=300))
def test_any_bytes_never_5xx(client, raw):
    _check(client.post("/v1/predict", content=raw, headers=JSON_HEADERS))
    _check(client.post("/v1/explain", content=raw, headers=JSON_HEADERS))


@FUZZ
@given(text=texts)
def test_any_text_explained_or_refused_never_5xx(client, text):
    raw = json.dumps({"text": text}, ensure_ascii=True).encode()
    _check_explain(client.post("/v1/explain", content=raw, headers=JSON_HEADERS))


def _check_explain(r) -> None:
    assert r.status_code < 500, r.text
    if r.status_code == 200:
        body = r.json()
        assert len(body["attention"][0][0]) == len(body["tokens"])
        assert body["completeness"]["within_tolerance"]


# --- every endpoint, from the OpenAPI document, behind API keys ----------------------------
API_KEY = "fuzz-api-key-0123456789abcdef"
ADMIN_KEY = "fuzz-admin-key-0123456789abcdef"
#: the endpoints that take a body; a test checks the document has no other
BODY_ENDPOINTS = ("/v1/predict", "/v1/explain", "/admin/reload")


def _texts_given(body: dict) -> int:
    return sum(name in body for name in ("text", "texts"))


@pytest.fixture(scope="module")
def keyed(encoder_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz_keys")
    (folder / "api.txt").write_text(API_KEY + "\n")
    (folder / "admin.txt").write_text(ADMIN_KEY + "\n")
    app = create_app(ServeConfig(model_dir=str(encoder_dir), max_texts=8, max_text_chars=400,
                                 max_body_bytes=4096, max_wait_ms=2.0, warmup=False,
                                 api_key_file=str(folder / "api.txt"),
                                 admin_key_file=str(folder / "admin.txt")))
    with TestClient(app) as c:
        wait_ready(c)
        document = c.get("/openapi.json", headers={"X-API-Key": API_KEY}).json()
        yield c, document


def _key_for(path: str) -> dict[str, str]:
    return {"X-API-Key": ADMIN_KEY if path.startswith("/admin/") else API_KEY}


def _post(client, path: str, body, headers: dict[str, str]):
    raw = json.dumps(body, ensure_ascii=True).encode()
    return client.post(path, content=raw, headers={**JSON_HEADERS, **headers})


def _error(r) -> dict:
    """A 4xx answer's error, checked to name the problem."""
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    err = r.json()["error"]
    assert err["status"] == r.status_code and err["type"] and err["message"].strip(), err
    if err["type"] == "validation_error":
        assert err["details"] and all(d["loc"] and d["msg"] for d in err["details"]), err
    return err


def test_the_fuzz_covers_every_endpoint_that_takes_a_body(keyed):
    _, document = keyed
    with_body = {path for path, ops in document["paths"].items()
                 for op in ops.values() if op.get("requestBody")}
    assert with_body == set(BODY_ENDPOINTS)
    assert document["paths"]["/admin/reload"]["post"]["security"]


@FUZZ
@given(data=st.data())
def test_bodies_the_schema_accepts_are_answered(keyed, data):
    client, document = keyed
    path = data.draw(st.sampled_from(BODY_ENDPOINTS))
    body = data.draw(valid(request_schema(document, path), document))
    r = _post(client, path, body, _key_for(path))
    if path == "/admin/reload":
        if r.status_code != 200:
            err = _error(r)
            if err["type"] == "reload_failed":  # no model in that directory
                assert body["model_dir"] and "still serving" in err["message"], err
            else:  # the rules across fields
                assert body["model"] is False and (body.get("model_dir") is not None
                                                   or body["keys"] is False), (body, err)
        return
    assert _texts_given(body) == 1  # the schema's oneOf: exactly one of text and texts
    assert r.status_code == 200, (body, r.text)
    answer = r.json()
    if path == "/v1/predict":
        sent = body["texts"] if body.get("text") is None else body["text"]
        assert len(answer["predictions"]) == (1 if isinstance(sent, str) else len(sent))
    else:
        assert len(answer["attention"][0][0]) == len(answer["tokens"])


@FUZZ
@given(data=st.data())
def test_a_body_one_change_away_is_refused_naming_the_problem(keyed, data):
    client, document = keyed
    path = data.draw(st.sampled_from(BODY_ENDPOINTS))
    body, change, field = data.draw(one_change(request_schema(document, path), document))
    r = _post(client, path, body, _key_for(path))
    if r.status_code == 200:
        assert change == "any_value"  # the value drawn happened to be a valid one
        return
    err = _error(r)
    if change == "unknown_field":
        assert r.status_code == 422 and field in err["message"], (field, err)
        assert "Extra inputs are not permitted" in err["message"]
    elif change == "not_an_object":
        assert r.status_code == 422 and err["message"].startswith("body: "), err


#: what may travel as a key: printable ASCII and spaces (what an HTTP client sends)
HEADER_TEXT = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40)


@st.composite
def key_headers(draw: st.DrawFn, key: str) -> tuple[dict[str, str], bool]:
    """Headers that may carry ``key``: ``(headers, carries_it)``."""
    how = draw(st.sampled_from(["bearer", "x-api-key", "both", "none"]))
    good = draw(st.booleans())
    token = key if good else draw(st.one_of(
        HEADER_TEXT, st.just(key[:-1]), st.just(key + "x"), st.just(key.upper()),
        st.just(key[::-1])).filter(lambda t: t.strip() != key))
    scheme = draw(st.sampled_from(["Bearer", "bearer", "BEARER", "Basic", "Token", ""]))
    pad = draw(st.sampled_from(["", " ", "  "]))
    headers = {}
    if how in ("bearer", "both"):
        headers["Authorization"] = f"{scheme} {pad}{token}{pad}".strip()
    if how in ("x-api-key", "both"):
        headers["X-API-Key"] = f"{pad}{token}{pad}"
    # every header sent must carry the key: an Authorization of another scheme (or none)
    # beside a good X-API-Key is refused
    carried = good and token.strip() != "" and (
        how == "x-api-key" or (how in ("bearer", "both") and scheme.lower() == "bearer"))
    return headers, carried


@FUZZ
@given(data=st.data())
def test_api_key_headers_on_every_endpoint(keyed, data):
    client, document = keyed
    operations = sorted((path, method) for path, ops in document["paths"].items()
                        for method in ops)
    path, method = data.draw(st.sampled_from(operations))
    key = ADMIN_KEY if path.startswith("/admin/") else API_KEY
    wrong = API_KEY if path.startswith("/admin/") else ADMIN_KEY
    headers, carried = data.draw(st.one_of(key_headers(key), key_headers(wrong).map(
        lambda hc: (hc[0], False))))  # the other file's key is no key here
    body = {"model": False} if path == "/admin/reload" else {"texts": "i lost my card"}
    r = client.request(method.upper(), path, headers={**JSON_HEADERS, **headers},
                       content=json.dumps(body).encode() if method == "post" else None)
    assert r.status_code < 500, r.text
    if path in ("/healthz", "/readyz"):  # the probes are open
        assert r.status_code == 200
    elif carried:
        assert r.status_code == 200, (headers, r.text)
    else:
        assert r.status_code == 401, (headers, r.text)
        assert r.json() == {"error": {"status": 401, "type": "unauthorized",
                                      "message": UNAUTHORIZED}}
        assert r.headers["www-authenticate"].startswith("Bearer")


@FUZZ
@given(raw=st.binary(max_size=200), key=st.booleans())
def test_any_bytes_to_the_admin_endpoint_never_5xx(keyed, raw, key):
    client, _ = keyed
    r = client.post("/admin/reload", content=raw,
                    headers={**JSON_HEADERS, **({"X-API-Key": ADMIN_KEY} if key else {})})
    if r.status_code != 200:
        _error(r)
    assert key or r.status_code == 401
