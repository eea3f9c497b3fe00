"""Serving a TF-IDF model and an ensemble: answers equal ``classifier.predict``'s, what the
service reports, and what it refuses at start-up."""

from __future__ import annotations

import pytest
from answers import confidence_of, intent_of
from fastapi.testclient import TestClient
from serve_helpers import wait_ready
from tiny_corpus import INTENTS
from tiny_models import MAX_LENGTH, TEXTS, tiny_encoder, tiny_tokenizer

from headwise.cli import build_parser
from headwise.intent.classifier import IntentClassifier
from headwise.intent.ensemble import EnsembleClassifier
from headwise.intent.inference.proba import ProbabilityPredictor
from headwise.intent.kinds import load_classifier
from headwise.intent.tfidf import TfidfClassifier
from headwise.serve import ServeConfig, create_app, load_served_predictor

LABELS = [y for y, ts in INTENTS.items() for _ in ts]
QUERIES = ["i lost my card yesterday", "please send money to my brother",
           "how much is left on my account", "xq zzv qqq"]


@pytest.fixture(scope="module")
def tfidf_dir(tmp_path_factory):
    clf = TfidfClassifier.fit(TEXTS, LABELS)
    clf._set_calibration(clf.labels, 0.7, 0.5, None)  # a real temperature and threshold
    return clf.save(tmp_path_factory.mktemp("serve") / "tfidf")


@pytest.fixture(scope="module")
def ensemble_dir(tmp_path_factory, tfidf_dir):
    tfidf = TfidfClassifier.load(tfidf_dir)
    tok = tiny_tokenizer()
    net = IntentClassifier(tiny_encoder(tok), tok, tfidf.labels, temperature=1.5,
                           threshold=0.3, max_length=MAX_LENGTH)
    return EnsembleClassifier([tfidf, net]).save(tmp_path_factory.mktemp("serve") / "ens")


def _served(model_dir):
    app = create_app(ServeConfig(model_dir=str(model_dir), max_wait_ms=2.0))
    return TestClient(app)


@pytest.mark.parametrize("kind", ["tfidf", "ensemble"])
def test_the_service_answers_what_predict_answers(kind, tfidf_dir, ensemble_dir):
    model_dir = tfidf_dir if kind == "tfidf" else ensemble_dir
    expected = load_classifier(model_dir).predict(QUERIES, top_k=2)
    cut = [False] * len(QUERIES)
    if kind == "ensemble":  # the tiny network's 12 tokens cut the longer queries
        net = next(m for m in load_classifier(model_dir).members
                   if isinstance(m, IntentClassifier))
        counts = net.tokenizer(QUERIES, max_length=None)["attention_mask"].sum(1).tolist()
        cut = [n > net.max_length for n in counts]
        assert any(cut) and not all(cut)
    with _served(model_dir) as client:
        wait_ready(client)
        assert client.get("/readyz").json()["runtime"] == kind
        body = client.post("/v1/predict", json={"texts": QUERIES, "top_k": 2}).json()
        one = client.post("/v1/predict", json={"texts": QUERIES[0]}).json()
        strict = client.post("/v1/predict", json={"texts": QUERIES, "threshold": 1.0}).json()
    assert body["runtime"] == kind
    for got, want, was_cut in zip(body["predictions"], expected, cut, strict=True):
        assert intent_of(got) == want.intent and got["out_of_scope"] == want.out_of_scope
        assert confidence_of(got) == pytest.approx(want.confidence, abs=1e-9)
        assert [k["intent"] for k in got["top_k"]] == [k for k, _ in want.top_k]
        assert [k["confidence"] for k in got["top_k"]] == pytest.approx(
            [p for _, p in want.top_k], abs=1e-9)
        assert (got["long_text"] is not None) == was_cut
    assert intent_of(one["predictions"][0]) == expected[0].intent
    assert all(p["out_of_scope"] for p in strict["predictions"])


def test_a_tfidf_model_is_explained_by_its_features_and_an_ensemble_refused(
        tfidf_dir, ensemble_dir):
    with _served(tfidf_dir) as client:
        wait_ready(client)
        r = client.post("/v1/explain", json={"text": QUERIES[0]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["attention"] is None and body["completeness"]["method"] == "feature_weights"
    assert abs(body["completeness"]["error"]) < 1e-9
    assert "".join(t["token"] for t in body["tokens"]) == QUERIES[0].replace(" ", "")
    with _served(ensemble_dir) as client:
        wait_ready(client)
        r = client.post("/v1/explain", json={"text": QUERIES[0]})
    assert r.status_code == 409 and r.json()["error"]["type"] == "unsupported_model"
    assert "the served model is an ensemble, which has no token attribution" in \
        r.json()["error"]["message"]


@pytest.mark.parametrize("options, match", [
    (dict(runtime="onnx"), "no ONNX export"),
    (dict(long_text="chunk"), "needs a single network"),
    (dict(long_text="reject"), "needs a single network"),
])
def test_what_a_tfidf_model_or_an_ensemble_cannot_do_is_refused_at_start(
        tfidf_dir, ensemble_dir, options, match):
    for model_dir in (tfidf_dir, ensemble_dir):
        with pytest.raises(ValueError, match=match):
            load_served_predictor(ServeConfig(model_dir=str(model_dir), **options))


def test_engine_predict_equals_the_batched_path(ensemble_dir):
    predictor = load_served_predictor(ServeConfig(model_dir=str(ensemble_dir)))
    assert isinstance(predictor, ProbabilityPredictor) and predictor.task == "single_label"
    direct = predictor.predict(QUERIES, top_k=3)
    expected = load_classifier(ensemble_dir).predict(QUERIES, top_k=3)
    assert [intent_of(d) for d in direct] == [e.intent for e in expected]


def test_serve_command_starts_a_tfidf_model(tfidf_dir, monkeypatch, capsys):
    import uvicorn

    from headwise.commands.serve import run

    calls = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append(app))
    assert run(build_parser().parse_args(["serve", str(tfidf_dir)])) == 0
    assert calls[0].state.serve.config.runtime == "auto"  # nothing to choose
    assert "runtime tfidf," in capsys.readouterr().err


def test_an_ensemble_reports_the_texts_its_network_truncates(ensemble_dir):
    ensemble = load_classifier(ensemble_dir)
    net = next(m for m in ensemble.members if isinstance(m, IntentClassifier))
    long = " ".join(["please send money to my brother"] * 8)
    tokens = int(net.tokenizer([long], max_length=None)["attention_mask"].sum())
    assert tokens > net.max_length
    expected = ensemble.predict([long, "lost card"], top_k=2)
    with _served(ensemble_dir) as client:
        wait_ready(client)
        body = client.post("/v1/predict", json={"texts": [long, "lost card"], "top_k": 2}).json()
        metrics = client.get("/metrics").text
    cut, short = body["predictions"]
    assert cut["long_text"] == {"policy": "truncated", "tokens": tokens,
                                "max_length": net.max_length, "chunks": 1,
                                "window": net.max_length, "stride": None, "pooling": None,
                                "chunk": None, "span": None}
    assert short["long_text"] is None
    assert intent_of(cut) == expected[0].intent
    assert confidence_of(cut) == pytest.approx(expected[0].confidence, abs=1e-9)
    assert 'headwise_texts_total{long_text="truncated"} 1.0' in metrics


def test_a_tfidf_model_reads_a_long_text_whole(tfidf_dir):
    predictor = ProbabilityPredictor(TfidfClassifier.load(tfidf_dir))
    long = " ".join(["please send money to my brother"] * 40)
    assert predictor.predict([long])[0]["long_text"] is None
