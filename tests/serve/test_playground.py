"""``GET /playground``: a static, self-contained page behind the same keys as ``/v1/*`` for
its data, off with ``--set playground=false``; the heads' roles it shows; and, in a real headless
Chromium against a real ``headwise serve``, the rendered intents, decision, slots,
attribution colours, attention heads and refusals."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser

import httpx
import pytest
from fastapi.testclient import TestClient
from serve_helpers import start_server_process

from headwise.cli import build_parser
from headwise.commands.serve_options import config_from_args
from headwise.models import ModelConfig
from headwise.models.encoder import EncoderClassifier
from headwise.serve import ServeConfig, create_app
from headwise.serve.playground import (
    PLAYGROUND_ASSETS,
    construction_roles,
    read_analysis_roles,
)

#: Chromium keeps a colour's alpha in 8 bits and prints it with 2 decimals
ALPHA_TOL = 0.006
KEY = "playground-key-0123456789abcdef"
#: any URL that names a scheme or a host: the page and its files must hold none
_EXTERNAL = re.compile(r"(?:https?:|wss?:|ftp:)?//[\w.-]+|\burl\(\s*['\"]?(?!data:)")


class _Refs(HTMLParser):
    """Every URL an HTML page references (src, href, action ...)."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.refs += [v or "" for k, v in attrs if k in ("src", "href", "action", "data",
                                                         "poster", "srcset")]


@pytest.fixture(scope="module")

def keys_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("playground") / "keys.txt"
    path.write_text(KEY + "\n")
    return path


def _client(model_dir, **settings):
    app = create_app(ServeConfig(model_dir=str(model_dir), max_wait_ms=2.0, **settings))
    return TestClient(app)


def test_page_is_static_self_contained_and_open(encoder_dir, keys_file):
    with _client(encoder_dir, api_key_file=str(keys_file)) as c:
        page = c.get("/playground")  # no key: a browser's navigation carries none
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        csp = page.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp \
            and "connect-src 'self'" in csp
        parser = _Refs()
        parser.feed(page.text)
        assert sorted(parser.refs) == sorted(f"playground/assets/{n}"
                                             for n in PLAYGROUND_ASSETS)
        assert not _EXTERNAL.search(page.text), _EXTERNAL.search(page.text)
        for name in PLAYGROUND_ASSETS:
            asset = c.get(f"/playground/assets/{name}")
            assert asset.status_code == 200
            assert asset.headers["content-type"].split(";")[0] in ("text/javascript",
                                                                  "text/css")
            found = _EXTERNAL.search(asset.text)
            assert found is None, (name, found)
        # the page holds nothing of the service: the same bytes whatever the model
        assert "encoder" not in page.text


def test_data_needs_the_key_and_the_rate_limit(encoder_dir, keys_file):
    with _client(encoder_dir, api_key_file=str(keys_file), rate_limit=0.01, burst=2) as c:
        assert c.get("/playground/heads").status_code == 401
        assert c.get("/playground/heads", headers={"X-API-Key": "x" * 20}).status_code == 401
        assert c.get("/playground/assets/other.js").status_code == 401  # default deny
        ok = c.get("/playground/heads", headers={"Authorization": f"Bearer {KEY}"})
        assert ok.status_code == 200
        assert ok.json() == {"model": "encoder", "has_attention": True, "analysis": False,
                             "note": None, "roles": [[[]] * 4] * 2}
        assert c.get("/playground/assets/other.js", headers={"X-API-Key": KEY}
                     ).status_code == 404
        refused = c.get("/playground/heads", headers={"X-API-Key": KEY})  # burst of 2 spent
        assert refused.status_code == 429 and "Retry-After" in refused.headers
        assert c.get("/playground").status_code == 200  # the static page is not counted


def test_playground_off_by_setting(encoder_dir, keys_file):
    args = build_parser().parse_args(["serve", str(encoder_dir), "--set", "playground=false",
                                      "--api-key-file", str(keys_file)])
    config = config_from_args(args)
    assert config.playground is False
    with _client(encoder_dir, playground=False, api_key_file=str(keys_file)) as c:
        for path in ("/playground", "/playground/heads", "/playground/assets/playground.js"):
            assert c.get(path).status_code == 401  # not open any more: default deny
            assert c.get(path, headers={"X-API-Key": KEY}).status_code == 404
    assert config_from_args(build_parser().parse_args(["serve", "m"])).playground is True
    with pytest.raises(ValueError, match="needs playground"):
        config_from_args(build_parser().parse_args(
            ["serve", "m", "--set", "playground=false", "--set",
             "playground_roles=stats.json"]))
    with pytest.raises(ValueError, match="needs playground"):
        ServeConfig(model_dir="m", playground=False, playground_roles="stats.json")


def test_roles_built_and_from_a_head_analysis(tmp_path):
    config = ModelConfig(vocab_size=50, d_model=16, num_layers=2, num_heads=4, d_ff=32,
                         max_position=32, num_labels=3, number_heads=[0, 2],
                         negation_heads=[2])
    roles = construction_roles(EncoderClassifier(config))
    assert [[[r["role"] for r in head] for head in layer] for layer in roles] == \
        [[["number"], [], ["number", "negation"], []]] * 2
    assert all(r["source"] == "built" for layer in roles for head in layer for r in head)
    assert construction_roles(None) is None

    stats = tmp_path / "stats.json"
    stats.write_text(json.dumps({"roles": [[[{"role": "negation", "score": 1.4,
                                               "evidence": "40% of the attention"}], [], [],
                                             []]] * 2}))
    read = read_analysis_roles(stats)
    assert read[1][0] == [{"role": "negation", "evidence": "40% of the attention",
                           "source": "analysis"}]
    (tmp_path / "bad.json").write_text(json.dumps({"stats": {}}))
    with pytest.raises(ValueError, match="no head roles"):
        read_analysis_roles(tmp_path / "bad.json")


def test_heads_answer_merges_the_analysis_of_the_served_shape(encoder_dir, tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"roles": [[[{"role": "previous", "evidence": "e"}]] * 4] * 2}))
    with _client(encoder_dir, playground_roles=str(good)) as c:
        body = c.get("/playground/heads").json()
    assert body["analysis"] is True and body["note"] is None
    assert body["roles"][1][3] == [{"role": "previous", "evidence": "e", "source": "analysis"}]
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"roles": [[[]] * 8] * 6}))
    with _client(encoder_dir, playground_roles=str(other)) as c:
        body = c.get("/playground/heads").json()
    assert body["analysis"] is False and "shape" in body["note"]
    assert body["roles"] == [[[]] * 4] * 2


# --- a real headless Chromium against a real `headwise serve` ------------------------------
def _chromium() -> str:
    """The system's Chromium, or a skip saying what is missing."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.skip("Playwright for Python is not installed (pip install 'headwise[dev]'): "
                    "the playground's browser test needs it")
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no Chromium on this machine (`./run` installs it where apt works): the "
                "playground's browser test needs one")


def start_serve(args: list[str]) -> tuple[subprocess.Popen, str, list[str]]:
    """``headwise serve ARGS --port 0`` in a subprocess, once ready: (process, URL, its
    stderr lines)."""
    return start_server_process([sys.executable, "-m", "headwise.cli", "serve", *args,
                                 "--port", "0"])


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def browser():
    executable = _chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def served(encoder_dir, keys_file, browser):
    proc, url, lines = start_serve([str(encoder_dir), "--runtime", "torch", "--api-key-file",
                                    str(keys_file), "--set", "max_text_chars=60"])
    yield url
    _stop(proc)
    assert "Traceback" not in "".join(lines) and KEY not in "".join(lines), "".join(lines)


def _open(browser, url: str, fragment: str = ""):
    page = browser.new_page()
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    page.goto(f"{url}/playground{fragment}")
    page.wait_for_selector("textarea.message")
    return page, requested


def _explain_all(page, texts: list[str]) -> None:
    for i, text in enumerate(texts):
        if i:
            page.click("#add")
        page.locator("textarea.message").nth(i).fill(text)
    page.click("#run")
    _status(page, re.compile(r"^answered in \d+ ms$"), timeout=60_000)


def _status(page, text: str | re.Pattern, timeout: float = 30_000) -> None:
    """Wait until the page's status line says ``text`` (a locator's wait: the page's CSP
    forbids the evaluated strings of ``wait_for_function``)."""
    from playwright.sync_api import expect

    expect(page.locator("#status")).to_have_text(text, timeout=timeout)


def _api(url: str, path: str, text: str) -> dict:
    r = httpx.post(f"{url}{path}", json={"text": text}, headers={"X-API-Key": KEY}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def _rgba(css: str) -> tuple[float, ...]:
    parts = [float(x) for x in re.findall(r"[\d.]+", css)]
    return tuple(parts) if len(parts) == 4 else (*parts, 1.0)


def test_browser_renders_intents_decision_tokens_and_heads(browser, served):
    page, requested = _open(browser, served, f"#key={KEY}")
    assert page.evaluate("location.hash") == ""  # the key left the address bar
    # a phrasing, its negation, and Chinese (shown from its character offsets, not as the
    # tiny vocabulary's [UNK])
    texts = ["i lost my card", "i did not lose my card", "我的卡丢了，帮我冻结"]
    _explain_all(page, texts)
    columns = page.locator("section.column")
    assert columns.count() == 3
    for i, text in enumerate(texts):
        column = columns.nth(i)
        want = _api(served, "/v1/predict", text)["predictions"][0]
        rows = column.locator("table.intents tr[data-intent]")
        assert [rows.nth(j).get_attribute("data-intent") for j in range(rows.count())] == \
            [t["intent"] for t in want["top_k"]]
        # the same up to float32 noise: the page's requests were batched with others
        assert [float(rows.nth(j).get_attribute("data-confidence"))
                for j in range(rows.count())] == pytest.approx(
                    [t["confidence"] for t in want["top_k"]], abs=1e-6)
        top = want["top_k"][0]
        assert f"{100 * top['confidence']:.1f} %" in rows.nth(0).inner_text()
        answered = "out of scope" if want["out_of_scope"] else want["intents"][0]["intent"]
        assert column.locator(".answer").get_attribute("data-answer") == answered
        d = want["decision"]
        decision = column.locator(".decision").inner_text()
        assert d["score"] in decision and f"threshold {d['threshold']:.3f}" in decision
        assert column.locator(".decision").get_attribute("data-oos") == \
            str(want["out_of_scope"]).lower()
        assert column.locator(".slots-none").count() == 1  # a single-label model: no slots

        explained = _api(served, "/v1/explain", text)
        tokens = column.locator(".tokens .tok")
        assert tokens.count() == len(explained["tokens"])
        shown = [tokens.nth(j).inner_text() for j in range(tokens.count())]
        assert [s for s, t in zip(shown, explained["tokens"], strict=True)
                if not t["special"]] == [text[t["start"]:t["end"]]
                                         for t in explained["tokens"] if not t["special"]]
        heads = column.locator(".heads .head")
        assert heads.count() == explained["num_heads"]
        colours = [_rgba(tokens.nth(j).evaluate("e => getComputedStyle(e).backgroundColor"))
                   for j in range(tokens.count())]
        if any(t.get("attribution") is not None for t in explained["tokens"]):
            # red for, blue against, the strongest at 0.85 opacity, the rest in proportion
            scale = max(abs(t["attribution"]) for t in explained["tokens"]
                        if t.get("attribution") is not None)
            for rgba, t in zip(colours, explained["tokens"], strict=True):
                a = t.get("attribution")
                if a is None:
                    continue
                assert rgba[:3] == ((207, 34, 46) if a >= 0 else (9, 105, 218))
                assert rgba[3] == pytest.approx(0.85 * abs(a) / scale, abs=ALPHA_TOL)
        else:  # this service's explanation has no attribution: shaded by rollout, and said
            assert column.locator(".tokens").get_attribute("data-by") == "rollout"
            assert column.locator(".no-attribution").count() == 1
            cls = explained["rollout"]["cls"]
            scale = max(r for r, t in zip(cls, explained["tokens"], strict=True)
                        if not t["special"])
            for rgba, r, t in zip(colours, cls, explained["tokens"], strict=True):
                if not t["special"]:
                    assert rgba[:3] == (130, 80, 223)
                    assert rgba[3] == pytest.approx(0.85 * r / scale, abs=ALPHA_TOL)
    # every request went to the service itself
    assert requested and all(u.startswith(served + "/") for u in requested), requested
    page.close()


def test_browser_colours_follow_the_attribution(browser, served):
    """The explanation's attributions set by hand (the real answer with ``attribution`` on
    each token): each token's colour is the one they call for."""
    page, _ = _open(browser, served)
    page.fill("#key", KEY)
    page.click("#key-use")
    _status(page, "key accepted")
    chosen: list[float | None] = []

    def with_attribution(route) -> None:
        body = route.fetch().json()
        for i, t in enumerate(body["tokens"]):
            t["attribution"] = None if t["special"] else [0.5, -0.25, 0.125, -1.0, 0.0][i % 5]
            chosen.append(t["attribution"])
        body["completeness"] = {"error": 0.001, "tolerance": 0.01}
        route.fulfill(status=200, content_type="application/json", body=json.dumps(body))

    page.route("**/v1/explain", with_attribution)
    _explain_all(page, ["i lost my card"])
    tokens = page.locator(".tokens .tok")
    assert page.locator(".tokens").get_attribute("data-by") == "attribution"
    assert page.locator(".no-attribution").count() == 0
    assert tokens.count() == len(chosen)
    scale = max(abs(a) for a in chosen if a is not None)
    for j, a in enumerate(chosen):
        rgba = _rgba(tokens.nth(j).evaluate("e => getComputedStyle(e).backgroundColor"))
        if a is None:
            assert rgba[3] == 0  # a special token: no colour
        else:
            assert rgba[:3] == ((207, 34, 46) if a >= 0 else (9, 105, 218)), (j, a, rgba)
            assert rgba[3] == pytest.approx(0.85 * abs(a) / scale, abs=ALPHA_TOL)
    assert "completeness: error 0.001, tolerance 0.010" in \
        page.locator(".completeness").inner_text()
    page.close()


@pytest.fixture(scope="module")
def served_span(encoder_dir, keys_file, browser):
    """The service under the chunk_span long-text policy."""
    proc, url, lines = start_serve([str(encoder_dir), "--runtime", "torch", "--api-key-file",
                                    str(keys_file), "--set", "max_text_chars=60", "--set",
                                    "long_text=chunk_span"])
    yield url
    _stop(proc)
    assert "Traceback" not in "".join(lines) and KEY not in "".join(lines), "".join(lines)


def test_browser_says_which_span_of_a_long_message_was_explained(browser, served_span):
    """Under chunk_span the page names the tokens read again and the window that located
    them, and the characters the explanation covers are the span's."""
    page, _ = _open(browser, served_span, f"#key={KEY}")
    text = "good morning sorry about the delay i lost my card"
    _explain_all(page, [text])
    explained = _api(served_span, "/v1/explain", text)
    note, window = explained["prediction"]["long_text"], explained["window"]
    assert note["pooling"] == "in_scope_span" and note["chunk"] and note["span"]
    line = page.locator(".explanation .window")
    assert line.inner_text() == (
        f"long message: explained tokens {note['span'][0] + 1}–{note['span'][1]} read again "
        f"(located by window {note['chunk']} of {note['chunks']}), whose answer was kept, "
        f"characters {window['start']}–{window['end']} of {len(text)}")
    words = [t for t in explained["tokens"] if not t["special"]]
    assert (window["start"], window["end"]) == (words[0]["start"], words[-1]["end"])
    page.close()


def test_browser_says_which_window_of_a_long_message_was_explained(browser, served):
    """A message over the model's 12 tokens: the service answers it from its most confident
    window (chunk_max), and the page says which characters the explanation covers."""
    page, _ = _open(browser, served, f"#key={KEY}")
    text = "good morning sorry about the delay i lost my card"
    _explain_all(page, [text])
    explained = _api(served, "/v1/explain", text)
    note, window = explained["prediction"]["long_text"], explained["window"]
    assert note["policy"] == "chunked" and note["chunk"] and window is not None
    line = page.locator(".explanation .window")
    assert line.count() == 1
    assert line.inner_text() == (f"long message: explained window {note['chunk']} of "
                                 f"{note['chunks']}, whose answer was kept, characters "
                                 f"{window['start']}–{window['end']} of {len(text)}")
    tokens = page.locator(".tokens .tok")
    assert [tokens.nth(j).inner_text() for j in range(tokens.count())
            if not explained["tokens"][j]["special"]] == \
        [text[t["start"]:t["end"]] for t in explained["tokens"] if not t["special"]]
    # a message within the limit says nothing of windows
    _explain_all(page, ["i lost my card"])
    assert page.locator(".explanation .window").count() == 0
    page.close()


def test_browser_shows_the_refusals(browser, served):
    page, _ = _open(browser, served)
    _status(page, "this service needs an API key: type it above")
    _explain_all(page, ["i lost my card"])  # no key given
    alerts = page.locator("section.column [role=alert]")
    assert alerts.count() == 1  # said once, not for each call the page made
    assert alerts.first.get_attribute("data-status") == "401"
    assert alerts.first.inner_text().startswith("/v1/predict: 401 unauthorized")
    assert "needs a valid API key" in alerts.first.inner_text()

    page.fill("#key", KEY)
    page.click("#key-use")
    _status(page, "key accepted")
    long = "please tell me why my card was declined at the shop again today " * 2
    _explain_all(page, [long])
    alert = page.locator("section.column [role=alert]").first
    assert alert.get_attribute("data-status") == "422"
    refused = httpx.post(f"{served}/v1/predict", json={"text": long},
                         headers={"X-API-Key": KEY}).json()["error"]["message"]
    assert refused in alert.inner_text()
    assert page.locator("table.intents").count() == 0
    page.close()


@pytest.fixture(scope="module")
def compound_dir(tmp_path_factory, trained_compound_dir):
    """A copy of the session's tiny compound model (tests/conftest.py) for this module."""
    import shutil

    out = tmp_path_factory.mktemp("playground_compound") / "model"
    shutil.copytree(trained_compound_dir, out)
    return out


def test_browser_renders_the_slots_of_a_compound_model(browser, compound_dir):
    proc, url, lines = start_serve([str(compound_dir), "--runtime", "torch"])
    try:
        page, _ = _open(browser, url)
        text = "i was charged twice for 300 pounds refund it"
        _explain_all(page, [text])
        want = httpx.post(f"{url}/v1/predict", json={"text": text}).json()["predictions"][0]
        assert want["slots"], want  # the trained model finds the amount
        rows = page.locator("table.slots tr[data-slot]")
        assert [(rows.nth(j).get_attribute("data-slot"),
                 json.loads(rows.nth(j).get_attribute("data-value")))
                for j in range(rows.count())] == [(s["name"], s["value"]) for s in want["slots"]]
        assert page.locator(".answer").get_attribute("data-answer") == \
            " + ".join(i["intent"] for i in want["intents"])
        # the roles the model was built with are beside its heads (number_heads [0])
        roles = httpx.get(f"{url}/playground/heads").json()["roles"]
        assert [[r["role"] for r in head] for head in roles[0]] == [["number"], [], [], []]
        explained = httpx.post(f"{url}/v1/explain", json={"text": text})
        if explained.status_code == 200 and explained.json().get("attention"):
            assert page.locator(".head[data-head='0'] .role").first.inner_text() == "number"
        else:  # this service does not explain a compound model: the page says so
            assert "no explanation" in page.locator(".note").first.inner_text()
        page.close()
    finally:
        _stop(proc)
    assert "Traceback" not in "".join(lines), "".join(lines)
