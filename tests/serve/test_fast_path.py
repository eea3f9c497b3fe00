"""The fast path of ``POST /v1/predict`` answers exactly what FastAPI answers, and takes
only the requests it can answer alike."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from serve_helpers import wait_ready
from tiny_models import TEXTS

from headwise.serve import ServeConfig, create_app
from headwise.serve import app as app_module
from headwise.serve.fastpath import FastRoute

JSON = "application/json"
LONG = "send money to my friend and then transfer fifty pounds to my savings account now"
DEEP = b'{"texts": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"

#: (body, content type): answered, refused by the service, and refused by validation
CASES = [
    ({"texts": "i lost my card"}, JSON),
    ({"texts": TEXTS[:5], "top_k": 2, "threshold": 0.3}, JSON),
    ({"texts": [LONG, "caf\u00e9 \u2603 balance"]}, JSON),
    ({"texts": "i lost my card"}, "application/json; charset=utf-8"),
    ({"texts": "i lost my card"}, "Application/JSON"),
    ({"texts": "i lost my card"}, "application/vnd.api+json"),
    ({"texts": "i lost my card"}, "text/x+json"),
    ({"texts": ["a"] * 9}, JSON),  # over max_texts
    ({"texts": ["ok", "  "]}, JSON),
    ({"texts": "x" * 401}, JSON),  # over max_text_chars
    ({"texts": "\ud800"}, JSON),  # an unpaired surrogate
    ({"texts": 3}, JSON),
    ({"texts": "ok", "top_k": "3"}, JSON),
    ({"texts": "ok", "top_k": 2.0}, JSON),  # an integer, as JSON Schema says
    ({"texts": "ok", "top_k": 2.5}, JSON),
    ({"texts": "ok", "threshold": 1}, JSON),
    ({"texts": "ok", "colour": "red"}, JSON),
    ([], JSON),
    (b'{"texts": ["a",', JSON),
    (b'{"texts": "a", "texts": "i lost my card"}', JSON),
    (b'{"texts": "ok", "threshold": NaN}', JSON),
    (b"", JSON),
    (DEEP, JSON),
]


def _body(body) -> bytes:
    return body if isinstance(body, bytes) else json.dumps(body).encode()


class _Counted(FastRoute):
    """The fast path, counting the requests it answers."""

    answered = 0

    def __init__(self, app, *, handler, **kwargs) -> None:
        async def counted(body):
            type(self).answered += 1
            return await handler(body)

        super().__init__(app, handler=counted, **kwargs)


class _Off:
    """No fast path: every request goes to FastAPI."""

    def __init__(self, app, **kwargs) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        await self.app(scope, receive, send)


def _client(encoder_dir, monkeypatch, route) -> TestClient:
    monkeypatch.setattr(app_module, "FastRoute", route)
    return TestClient(create_app(ServeConfig(model_dir=str(encoder_dir), max_texts=8,
                                             max_text_chars=400, max_body_bytes=1 << 20)))


@pytest.fixture(scope="module")
def answers(encoder_dir):
    """Status, headers and body of each case with and without the fast path."""
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        for name, route in (("fast", _Counted), ("fastapi", _Off)):
            with _client(encoder_dir, mp, route) as c:
                wait_ready(c)
                out[name] = [c.post("/v1/predict", content=_body(b),
                                    headers={"content-type": ctype}) for b, ctype in CASES]
    return out


@pytest.mark.parametrize("i", range(len(CASES)))
def test_the_fast_path_answers_exactly_as_fastapi(answers, i):
    fast, slow = answers["fast"][i], answers["fastapi"][i]
    assert fast.status_code == slow.status_code
    assert fast.content == slow.content  # the same bytes, errors worded alike
    drop = {"date", "server"}
    assert [(k, v) for k, v in fast.headers.items() if k not in drop] == \
        [(k, v) for k, v in slow.headers.items() if k not in drop]


def test_the_fast_path_takes_well_formed_requests_only(answers):
    status = [r.status_code for r in answers["fast"]]
    # "+json" media types: FastAPI reads application/... as JSON, text/... not; a top_k of
    # 2.0 is an integer (JSON Schema's), an integer threshold a float; of a duplicated key
    # the last counts, as in json.loads
    assert status == [200] * 6 + [422] * 7 + [200, 422] + [200, 422, 422, 400, 200, 422, 422,
                                                           400]
    # answered on the fast path: the answered requests sent as plain application/json
    # (not the "+json" one) and the service's own refusals (too many texts, an empty one,
    # one too long, a surrogate); every other request went on to FastAPI
    assert _Counted.answered == 5 + 3 + 4


def test_other_routes_and_methods_pass_through(encoder_dir, monkeypatch):
    _Counted.answered = 0
    with _client(encoder_dir, monkeypatch, _Counted) as c:
        wait_ready(c)
        assert c.get("/v1/predict").status_code == 405
        r = c.post("/v1/predict/", json={"texts": "a"}, follow_redirects=False)
        assert r.status_code == 307  # FastAPI's redirect to /v1/predict
        assert c.post("/v1/explain", json={"text": "i lost my card"}).status_code == 200
        assert c.post("/v1/predict", json={"texts": "i lost my card"}).status_code == 200
    assert _Counted.answered == 1
