"""API keys: the key file, constant-time checks, who needs a key, reloads, and keys never
logged."""

from __future__ import annotations

import hmac
import logging
import os

import pytest
from answers import intent_of
from fastapi.testclient import TestClient
from serve_helpers import wait_ready

from headwise.cli import build_parser
from headwise.commands.serve_options import config_from_args
from headwise.serve import ServeConfig, create_app
from headwise.serve import auth as auth_module
from headwise.serve.access import UNAUTHORIZED, presented_keys
from headwise.serve.auth import MIN_KEY_CHARS, ApiKeys, KeyFileError, read_key_file

KEY = "k3y-Alpha-0123456789abcdef"
OTHER = "k3y-Bravo-fedcba9876543210"
ADMIN = "adm1n-Charlie-00112233445566"
WRONG = "not-a-key-but-long-enough-xyz"
BEARER = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture
def key_file(tmp_path):
    path = tmp_path / "keys.txt"
    path.write_text(f"# service keys\n\n  {KEY}  \n{OTHER}\n# {WRONG}\n{KEY}\n")
    return path


@pytest.fixture
def keyed(encoder_dir, key_file):
    app = create_app(ServeConfig(model_dir=str(encoder_dir), api_key_file=str(key_file)))
    with TestClient(app) as c:
        wait_ready(c)
        yield c


def test_key_file_skips_blank_lines_comments_and_repeats(key_file):
    assert read_key_file(key_file) == [KEY, OTHER]
    keys = ApiKeys(key_file)
    assert len(keys) == 2
    assert keys.identify([KEY]) is not None and keys.identify([OTHER]) is not None
    assert keys.identify([KEY]) != keys.identify([OTHER])
    # the commented key, a prefix, a key with a character more, nothing: no key
    for bad in ([WRONG], [KEY[:-1]], [KEY + "x"], [""], []):
        assert keys.identify(bad) is None
    # every presented key must be valid: a wrong one beside a valid one is refused
    assert keys.identify([WRONG, OTHER]) is None and keys.identify([OTHER, ""]) is None
    # valid keys only: the first one is the request's identity
    assert keys.identify([KEY, OTHER]) == keys.identify([KEY])
    assert keys.identify([OTHER, OTHER]) == keys.identify([OTHER])


@pytest.mark.parametrize("line, problem", [
    ("short-key", f"too short to be secret (at least {MIN_KEY_CHARS}"),
    ("has a space in the middle!!", "printable ASCII without spaces"),
    ("ключ-0123456789abcdef", "printable ASCII without spaces"),
])
def test_a_bad_key_line_names_file_and_line_never_the_key(tmp_path, line, problem):
    path = tmp_path / "keys.txt"
    path.write_text(f"{KEY}\n# comment\n{line}\n")
    with pytest.raises(KeyFileError) as e:
        read_key_file(path)
    assert str(e.value).startswith(f"{path}:3: ") and problem in str(e.value)
    assert line not in str(e.value) and KEY not in str(e.value)


def test_a_key_file_without_keys_or_not_utf8_is_refused(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing yet\n\n")
    with pytest.raises(KeyFileError, match="no keys"):
        ApiKeys(empty)
    assert len(ApiKeys(empty, require_keys=False)) == 0
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"caf\xe9-0123456789abcdef\n")
    with pytest.raises(KeyFileError, match="not UTF-8.*0xe9"):
        read_key_file(latin)


def test_every_key_is_compared_in_constant_time(key_file, monkeypatch):
    calls = []
    compare = hmac.compare_digest

    def counting(a, b):
        calls.append((len(a), len(b)))
        return compare(a, b)

    monkeypatch.setattr(auth_module.hmac, "compare_digest", counting)
    keys = ApiKeys(key_file)
    for presented in ([KEY], [OTHER], [WRONG], [WRONG, KEY]):
        calls.clear()
        keys.identify(presented)
        # every presented key against every key, matched or not, on 32-byte digests
        assert calls == [(32, 32)] * (2 * len(presented))


def test_headers_that_carry_a_key():
    scope = {"headers": [(b"authorization", b"bearer  tok-1 "), (b"x-api-key", b" tok-2"),
                         (b"authorization", b"Basic dXNlcjpwYXNz"), (b"x-api-key", b""),
                         (b"authorization", b"Bearer")]}
    # a header that carries no key is presented as "" (never a key: the request is refused)
    assert presented_keys(scope) == ["tok-1", "tok-2", "", "", ""]


def test_missing_and_wrong_keys_get_the_same_401(keyed):
    answers = [keyed.post("/v1/predict", json={"texts": "hi"}, headers=h) for h in (
        {}, {"Authorization": f"Bearer {WRONG}"}, {"X-API-Key": WRONG},
        {"Authorization": f"Basic {KEY}"}, {"Authorization": KEY})]
    for r in answers:
        assert r.status_code == 401
        assert r.headers["www-authenticate"].startswith("Bearer")
        assert r.json() == {"error": {"status": 401, "type": "unauthorized",
                                      "message": UNAUTHORIZED}}
        assert r.content == answers[0].content


@pytest.mark.parametrize("headers", [BEARER, {"Authorization": f"bearer {OTHER}"},
                                     {"X-API-Key": KEY}, {"x-api-key": f" {OTHER} "}])
def test_a_valid_key_in_either_header_is_let_in(keyed, headers):
    r = keyed.post("/v1/predict", json={"texts": "i lost my card"}, headers=headers)
    assert r.status_code == 200 and intent_of(r.json()["predictions"][0])


@pytest.mark.parametrize("authorization", [f"Bearer {WRONG}", "Bearer ", "", f"Basic {KEY}",
                                           "#.cQ*id"])
def test_a_wrong_credential_beside_a_valid_key_is_refused(keyed, authorization):
    # what a schema fuzzer sends (schemathesis's ignored_auth): a generated Authorization
    # beside the valid X-API-Key; a presented credential that is not a valid key is a 401
    r = keyed.post("/v1/predict", json={"texts": "i lost my card"},
                   headers={"Authorization": authorization, "X-API-Key": KEY})
    assert r.status_code == 401 and r.json()["error"]["type"] == "unauthorized"
    both = keyed.post("/v1/predict", json={"texts": "i lost my card"},
                      headers={**BEARER, "X-API-Key": OTHER})
    assert both.status_code == 200


def test_only_the_probes_are_open(keyed):
    for path in ("/healthz", "/readyz"):
        assert keyed.get(path).status_code == 200
    # default deny: everything else, unknown paths and the schema included, needs a key
    for method, path in (("GET", "/metrics"), ("POST", "/v1/explain"), ("GET", "/docs"),
                         ("GET", "/openapi.json"), ("GET", "/no/such/path"),
                         ("POST", "/admin/reload"), ("GET", "/healthz/")):
        assert keyed.request(method, path).status_code == 401, path
    assert keyed.get("/metrics", headers=BEARER).status_code == 200
    assert keyed.get("/no/such/path", headers=BEARER).status_code == 404
    schema = keyed.get("/openapi.json", headers=BEARER).json()
    assert set(schema["components"]["securitySchemes"]) == {"bearer", "apiKey"}
    assert schema["paths"]["/v1/predict"]["post"]["security"]
    assert "security" not in schema["paths"]["/healthz"]["get"]


def test_open_metrics_and_a_service_without_keys(encoder_dir, key_file):
    app = create_app(ServeConfig(model_dir=str(encoder_dir), api_key_file=str(key_file),
                                 open_metrics=True, warmup=False))
    with TestClient(app) as c:
        assert c.get("/metrics").status_code == 200
        assert c.post("/v1/predict", json={"texts": "hi"}).status_code == 401
    # no key file: open, but nobody may reload it
    with TestClient(create_app(ServeConfig(model_dir=str(encoder_dir), warmup=False))) as c:
        assert c.get("/metrics").status_code == 200
        r = c.post("/admin/reload", headers=BEARER)
        assert r.status_code == 403 and r.json()["error"]["type"] == "admin_disabled"
        assert "--api-key-file" in r.json()["error"]["message"]


def test_admin_keys_are_the_only_ones_that_reload(encoder_dir, key_file, tmp_path):
    admin_file = tmp_path / "admin.txt"
    admin_file.write_text(ADMIN + "\n")
    app = create_app(ServeConfig(model_dir=str(encoder_dir), api_key_file=str(key_file),
                                 admin_key_file=str(admin_file)))
    with TestClient(app) as c:
        wait_ready(c)
        assert c.post("/admin/reload", headers=BEARER, json={"model": False}).status_code \
            == 401
        r = c.post("/admin/reload", headers={"X-API-Key": ADMIN}, json={"model": False})
        assert r.status_code == 200, r.text
        assert r.json()["api_keys"] == 2 and r.json()["admin_keys"] == 1
        # an admin key does not query the service
        assert c.post("/v1/predict", json={"texts": "hi"},
                      headers={"X-API-Key": ADMIN}).status_code == 401


def test_keys_reload_on_the_admin_endpoint_and_a_bad_file_keeps_them(keyed, key_file):
    key_file.write_text(f"{OTHER}\n")  # KEY revoked (the change may be seen at once, too)
    other = {"X-API-Key": OTHER}
    r = keyed.post("/admin/reload", headers=other, json={"model": False})
    assert r.status_code == 200 and r.json()["api_keys"] == 1
    assert keyed.post("/v1/predict", json={"texts": "hi"}, headers=BEARER).status_code == 401
    key_file.write_text(f"{OTHER}\nbad\n")
    r = keyed.post("/admin/reload", headers=other, json={"model": False})
    assert r.status_code == 422 and r.json()["error"]["type"] == "reload_failed"
    message = r.json()["error"]["message"]
    assert f"{key_file}:2:" in message and "keeping the 1 in use" in message
    assert keyed.post("/v1/predict", json={"texts": "hi"}, headers=other).status_code == 200
    metrics = keyed.get("/metrics", headers=other).text
    assert 'headwise_reloads_total{result="ok",what="keys"} 1.0' in metrics
    assert 'headwise_reloads_total{result="failed",what="keys"} 1.0' in metrics


def test_a_changed_file_is_read_again_when_its_time_comes(key_file, caplog):
    now = [0.0]
    keys = ApiKeys(key_file, clock=lambda: now[0], check_every_s=1.0)
    old = os.stat(key_file).st_mtime_ns
    key_file.write_text(f"{WRONG}\n")
    os.utime(key_file, ns=(old + 10**9, old + 10**9))
    keys.refresh()  # the first look
    assert keys.identify([WRONG]) is not None and keys.identify([KEY]) is None
    key_file.write_text(f"{KEY}\n")
    os.utime(key_file, ns=(old + 2 * 10**9, old + 2 * 10**9))
    now[0] = 0.5
    keys.refresh()  # too soon: not looked at
    assert keys.identify([KEY]) is None
    now[0] = 1.5
    keys.refresh()
    assert keys.identify([KEY]) is not None
    # a bad edit is logged once and the keys in use stay
    key_file.write_text("tiny\n")
    with caplog.at_level(logging.ERROR, logger="headwise.serve"):
        for t in (3.0, 4.5, 6.0):
            now[0] = t
            keys.refresh()
    assert keys.identify([KEY]) is not None
    errors = [r for r in caplog.records if "could not reload the API keys" in r.getMessage()]
    assert len(errors) == 1 and "tiny" not in errors[0].getMessage()
    key_file.unlink()
    now[0] = 8.0
    keys.refresh()
    assert keys.identify([KEY]) is not None


def test_keys_are_never_logged(encoder_dir, key_file, caplog):
    app = create_app(ServeConfig(model_dir=str(encoder_dir), api_key_file=str(key_file)))
    with caplog.at_level(logging.DEBUG), TestClient(app) as c:
        wait_ready(c)
        for headers in ({"Authorization": f"Bearer {WRONG}"}, {"X-API-Key": WRONG}, BEARER):
            c.post("/v1/predict", json={"texts": "hi"}, headers=headers)
            c.get("/metrics", headers=headers)
        c.post("/admin/reload", headers=BEARER, json={"model": False})
    text = "\n".join(f"{r.getMessage()} {r.args!r} {r.__dict__!r}" for r in caplog.records)
    assert "refused POST /v1/predict" in text  # the refusal was logged, without the key
    for secret in (KEY, OTHER, WRONG):
        assert secret not in text


def test_access_options_make_the_config_and_need_each_other(key_file, capsys):
    args = build_parser().parse_args(["serve", "m", "--api-key-file", str(key_file),
                                      "--set", "rate_limit=2.5", "--set", "burst=4", "--set",
                                      "open_metrics=true"])
    cfg = config_from_args(args)
    assert (cfg.api_key_file, cfg.rate_limit, cfg.burst, cfg.open_metrics) == (
        str(key_file), 2.5, 4, True)
    assert ServeConfig.from_json(cfg.to_json()) == cfg
    for argv, message in ((["--set", "rate_limit=3"], "rate_limit is per API key: it needs "
                                                      "api_key_file"),
                          (["--admin-key-file", "a"], "--admin-key-file needs --api-key-file"),
                          (["--api-key-file", "k", "--set", "burst=3"], "burst .* needs "
                                                                        "rate_limit"),
                          (["--api-key-file", "k", "--set", "rate_limit=0"], "rate_limit must"),
                          (["--api-key-file", "k", "--set", "rate_limit=Infinity"],
                           "rate_limit must"),
                          (["--api-key-file", "k", "--set", "rate_limit=inf"],
                           "rate_limit is float or null"),
                          (["--api-key-file", "k", "--set", "rate_limit=1", "--set",
                            "burst=0"], "burst must")):
        with pytest.raises(ValueError, match=message):
            config_from_args(build_parser().parse_args(["serve", "m", *argv]))
    for bad, match in (({"rate_limit": 1.0}, "rate_limit is per API key"),
                       ({"api_key_file": "k", "rate_limit": -1}, "rate_limit must be"),
                       ({"api_key_file": "k", "burst": 2}, "burst .* needs rate_limit"),
                       ({"admin_key_file": "a"}, "admin_key_file needs api_key_file"),
                       ({"workers": 0}, "workers")):
        with pytest.raises(ValueError, match=match):
            ServeConfig(**bad)
    assert ServeConfig(api_key_file="k", rate_limit=2.5).bucket_size == 3


def test_serve_refuses_a_bad_key_file_before_loading_and_announces_no_key(
        encoder_dir, key_file, tmp_path, monkeypatch, capsys):
    import uvicorn

    from headwise.cli import main

    calls = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append(app))
    bad = tmp_path / "bad.txt"
    bad.write_text("short\n")
    assert main(["serve", str(encoder_dir), "--port", "0", "--api-key-file", str(bad)]) == 1
    assert capsys.readouterr().err.strip() == (
        f"headwise serve: error: {bad}:1: a key of 5 characters is too short to be secret (at "
        f"least 16; `python -c \"import secrets; print(secrets.token_urlsafe(32))\"` makes one)")
    assert not calls
    assert main(["serve", str(encoder_dir), "--port", "0", "--runtime", "torch",
                 "--api-key-file", str(key_file), "--set", "rate_limit=5"]) == 0
    banner = capsys.readouterr().err.splitlines()[-1]
    assert "API keys required (2 keys; 5 requests/s per key, burst 5)" in banner
    assert KEY not in banner and OTHER not in banner
    assert calls[0].state.serve.config.sighup_reload


def test_a_websocket_without_a_key_is_closed_before_the_app(keyed):
    from starlette.websockets import WebSocketDisconnect

    with pytest.raises(WebSocketDisconnect) as e, keyed.websocket_connect("/v1/predict"):
        pass
    assert e.value.code == 1008  # policy violation: no key
