"""The published OpenAPI schema says exactly what the service accepts: schemathesis, run
from the service's own ``/openapi.json`` with every check over every operation (its
examples, coverage and fuzzing phases, as ``schemathesis run --checks all`` does), finds
nothing, with the service open, behind API keys (admin keys on ``/admin/*``), and behind a
rate limit; and plain tests of what it found before (issue 32): ``text`` and ``texts``
together, and an undeclared method on ``/admin/reload``."""

from __future__ import annotations

from collections import Counter

import pytest
import schemathesis
from fastapi.testclient import TestClient
from schemathesis.config import SchemathesisConfig
from schemathesis.engine import Status, events, from_schema
from serve_helpers import wait_ready

from headwise.serve import ServeConfig, create_app
from headwise.serve.access import ADMIN_DISABLED, UNAUTHORIZED

API_KEY = "openapi-fuzz-api-key-0123456789"
ADMIN_KEY = "openapi-fuzz-admin-key-0123456789"
#: what schemathesis expects of a request its schema accepts (any of these statuses), and
#: 422 for ``/admin/reload``: a ``model_dir`` that names no model directory is refused 422
#: ``reload_failed`` (its description says so; no schema can say which directories hold a
#: model)
POSITIVE_DATA_ACCEPTANCE_EXPECTED_STATUSES = ["2xx", "3xx", "401", "403", "404", "409", "429",
                                              "5xx"]
#: examples per operation in the fuzzing phase; the coverage phase adds its own (every
#: undeclared method, each boundary and each rule broken once)
MAX_EXAMPLES = 8
SERVICE = dict(max_texts=8, max_text_chars=400, max_body_bytes=4096, max_wait_ms=2.0,
               warmup=False)


@pytest.fixture(scope="module")
def key_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("openapi_keys")
    (folder / "api.txt").write_text(API_KEY + "\n")
    (folder / "admin.txt").write_text(ADMIN_KEY + "\n")
    return folder / "api.txt", folder / "admin.txt"


def _fuzz(app, headers: dict[str, str] | None = None,
          admin_headers: dict[str, str] | None = None
          ) -> tuple[list[str], Counter[str], set[str]]:
    """Run schemathesis's engine in process over every operation of ``app``'s schema,
    with every check; ``(failures, checks run by name, operations tested)``."""
    reload = {"include-path": "/admin/reload", "checks": {"positive_data_acceptance": {
        "expected-statuses": [*POSITIVE_DATA_ACCEPTANCE_EXPECTED_STATUSES, "422"]}}}
    config = SchemathesisConfig.from_dict({
        "seed": 32, "suppress-health-check": ["all"], "workers": 1,
        "checks": {"enabled": True},
        # no example database: every run draws the same examples from the seed
        "generation": {"max-examples": MAX_EXAMPLES, "database": "none"},
        "headers": headers or {},
        "operations": [{**reload, "headers": admin_headers} if admin_headers else reload]})
    schema = schemathesis.openapi.from_asgi("/openapi.json", app, config=config,
                                            headers=headers or {})
    failures: list[str] = []
    checks: Counter[str] = Counter()
    tested: set[str] = set()
    try:
        for event in from_schema(schema).execute():
            if isinstance(event, events.ScenarioFinished):
                tested.add(event.recorder.label)
                for nodes in event.recorder.checks.values():
                    for node in nodes:
                        checks[node.name] += 1
                        if node.status != Status.SUCCESS:
                            info = node.failure_info
                            failures.append(f"{event.recorder.label}: {node.name}: " + (
                                f"{info.failure.title}: {info.failure.message}\n"
                                f"{info.code_sample}" if info else str(node.status)))
            elif isinstance(event, events.NonFatalError | events.FatalError):
                failures.append(f"{getattr(event, 'label', '')}: error: "
                                f"{getattr(event, 'value', None) or event.exception}")
    finally:
        schemathesis.python.asgi.shutdown_lifespans()  # the app's batcher stops
    return sorted(set(failures)), checks, tested


def _operations(app) -> set[str]:
    return {f"{method.upper()} {path}" for path, ops in app.openapi()["paths"].items()
            for method in ops}


def test_schemathesis_finds_nothing_on_an_open_service(encoder_dir):
    app = create_app(ServeConfig(model_dir=str(encoder_dir), **SERVICE))
    failures, checks, tested = _fuzz(app)
    assert failures == [], "\n\n".join(failures)
    assert tested == _operations(app) and len(tested) == 6 and checks.total() > 500
    # every check ran, those of issue 32 among them
    assert {"not_a_server_error", "status_code_conformance", "response_schema_conformance",
            "negative_data_rejection", "positive_data_acceptance", "unsupported_method",
            "content_type_conformance", "response_headers_conformance"} <= set(checks)


def test_schemathesis_finds_nothing_behind_api_and_admin_keys(encoder_dir, key_files):
    api, admin = key_files
    app = create_app(ServeConfig(model_dir=str(encoder_dir), api_key_file=str(api),
                                 admin_key_file=str(admin), **SERVICE))
    # the key in X-API-Key, so the fuzzer's own Authorization headers are wrong keys beside
    # it (its ignored_auth check): refused
    failures, checks, tested = _fuzz(app, {"X-API-Key": API_KEY}, {"X-API-Key": ADMIN_KEY})
    assert failures == [], "\n\n".join(failures)
    assert tested == _operations(app) and checks.total() > 500 and checks["ignored_auth"]


def test_schemathesis_finds_nothing_behind_a_rate_limit(encoder_dir, key_files):
    api, _ = key_files
    app = create_app(ServeConfig(model_dir=str(encoder_dir), api_key_file=str(api),
                                 rate_limit=5.0, burst=5, **SERVICE))
    failures, _, tested = _fuzz(app, {"Authorization": f"Bearer {API_KEY}"})
    # the 429s included: declared, with the error body
    assert failures == [], "\n\n".join(failures)
    assert tested == _operations(app)


def test_schemathesis_finds_nothing_on_a_compound_classifier(compound_corpus,
                                                             tmp_path_factory):
    from headwise.intent.training.pipeline import train_intent_classifier
    from headwise.intent.training.recipe import IntentRecipe

    recipe = IntentRecipe.from_dict({
        "architecture": {"type": "transformer", "tokenizer": "wordpiece", "vocab_size": 120,
                         "max_length": 24, "d_model": 32, "num_layers": 1, "num_heads": 4,
                         "d_ff": 64},
        "train": {"epochs": 2, "batch_size": 8, "patience": None, "progress": False},
        "task": {"type": "multi_label"}})
    out = tmp_path_factory.mktemp("openapi_compound") / "model"
    train_intent_classifier(compound_corpus, compound_corpus, recipe, out_dir=out)
    app = create_app(ServeConfig(model_dir=str(out), **SERVICE))
    assert "CompoundPredictRequest" in app.openapi()["components"]["schemas"]
    failures, _, tested = _fuzz(app)
    # /v1/explain included: a compound model is explained per answered intent
    assert failures == [], "\n\n".join(failures)
    assert tested == _operations(app)


# --- what the fuzzer found before (issue 32) ---------------------------------------------

@pytest.fixture(scope="module")
def open_client(encoder_dir):
    with TestClient(create_app(ServeConfig(model_dir=str(encoder_dir), **SERVICE))) as c:
        wait_ready(c)
        yield c


@pytest.mark.parametrize("path, schema_name", [("/v1/predict", "PredictRequest"),
                                               ("/v1/explain", "ExplainRequest")])
def test_text_and_texts_together_are_refused_and_the_schema_says_so(open_client, path,
                                                                    schema_name):
    import jsonschema_rs

    document = open_client.get("/openapi.json").json()
    schema = {**document["components"]["schemas"][schema_name],
              "components": document["components"]}
    validator = jsonschema_rs.validator_for(schema)
    both = {"text": "i lost my card", "texts": ["i lost my card"]}
    for body in (both, {}, {"text": None, "texts": "i lost my card"},
                 {"text": "i lost my card", "texts": None}):
        assert not validator.is_valid(body), body  # the schema refuses it ...
        r = open_client.post(path, json=body)  # ... and so does the service
        assert r.status_code == 422, (body, r.text)
        assert r.json()["error"]["type"] == "validation_error"
    r = open_client.post(path, json=both)
    assert "give either text (one text) or texts" in r.json()["error"]["message"]
    for body in ({"text": "i lost my card"}, {"texts": "i lost my card"},
                 {"texts": ["i lost my card"]}):
        assert validator.is_valid(body)
        assert open_client.post(path, json=body).status_code == 200, body


def test_what_the_text_pattern_calls_white_space_is_what_the_service_refuses(open_client):
    import re

    import jsonschema_rs

    document = open_client.get("/openapi.json").json()
    text = document["components"]["schemas"]["PredictRequest"]["properties"]["text"]
    validator = jsonschema_rs.validator_for(text)
    # U+001C..U+001F and U+0085 are white space to Python (str.strip) but not to JSON
    # Schema's \s; U+FEFF the other way round
    for ch in ("\x1d", "\x85", "\u3000", " \t\n", "\ufeff", "a", "\x00"):
        refused = open_client.post("/v1/predict", json={"text": ch}).status_code == 422
        assert validator.is_valid(ch) is not refused, repr(ch)
        assert refused is (not ch.strip())
    space = {chr(i) for i in range(0x110000) if chr(i).isspace()}
    pattern = re.compile(text["pattern"])
    assert {chr(i) for i in range(0x110000) if not pattern.search(chr(i))} == space


@pytest.mark.parametrize("method", ["TRACE", "PUT", "DELETE", "PATCH", "GET", "OPTIONS"])
def test_an_undeclared_method_on_admin_reload_is_405_with_allow(open_client, method):
    r = open_client.request(method, "/admin/reload")
    assert r.status_code == 405 and r.headers["allow"] == "POST"
    err = r.json()["error"]
    assert err["type"] == "method_not_allowed" and method in err["message"]
    # the method the endpoint takes is still refused: no keys, no admin endpoints
    r = open_client.post("/admin/reload", json={})
    assert r.status_code == 403 and r.json()["error"]["message"] == ADMIN_DISABLED


@pytest.mark.parametrize("path, allow", [("/v1/predict", "POST"), ("/v1/explain", "POST"),
                                         ("/healthz", "GET"), ("/readyz", "GET"),
                                         ("/metrics", "GET")])
def test_every_route_answers_an_undeclared_method_405_with_allow(open_client, path, allow):
    r = open_client.request("TRACE", path)
    assert r.status_code == 405 and r.headers["allow"] == allow


def test_behind_keys_a_method_is_checked_once_the_key_is(encoder_dir, key_files):
    api, admin = key_files
    app = create_app(ServeConfig(model_dir=str(encoder_dir), api_key_file=str(api),
                                 admin_key_file=str(admin), **SERVICE))
    with TestClient(app) as c:
        wait_ready(c)
        # without a key the service's map stays hidden: 401, as for an unknown path
        for path in ("/admin/reload", "/v1/predict", "/no/such/path"):
            r = c.request("TRACE", path)
            assert r.status_code == 401 and r.json()["error"]["message"] == UNAUTHORIZED
        # the open probes: 405 to anyone
        assert c.request("TRACE", "/healthz").headers["allow"] == "GET"
        # with the key the path takes: 405 and Allow
        for path, key in (("/admin/reload", ADMIN_KEY), ("/v1/predict", API_KEY)):
            r = c.request("TRACE", path, headers={"X-API-Key": key})
            assert r.status_code == 405 and r.headers["allow"] == "POST"
