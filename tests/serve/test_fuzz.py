"""Property-based fuzz of /v1/predict: any JSON, any bytes, any text -> never a 5xx."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
            assert 0.0 <= p["confidence"] <= 1.0 and p["top_k"]
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
