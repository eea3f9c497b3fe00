"""Serving a compound (multi-label + slots) classifier: answers equal
``CompoundClassifier.predict``, batched or not; overrides; refusals of what is unsupported."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient
from serve_helpers import post_concurrently, wait_ready

from headwise.cli import main
from headwise.intent.compound.classifier import CompoundClassifier
from headwise.intent.compound.thresholds import Thresholds
from headwise.intent.inference import CompoundPredictor, TorchRuntime
from headwise.models import ModelConfig
from headwise.models.joint import JointIntentSlotModel
from headwise.serve import ServeConfig, create_app, load_served_predictor

#: over the model's 24 tokens: truncated (or refused under "reject")
LONG = "i was charged twice for 50 pounds and then again for 75 pounds so please refund " \
       "both of them to my account today"
TEXTS = ["send 50 pounds to my sister", "i was charged twice for 300 pounds refund it",
         "what is the weather today", "refund the 20 pounds please",
         "why was i charged 1,200 pounds", "send 75 pounds now", "hi", LONG]


@pytest.fixture(scope="module")
def compound_dir(trained_compound_dir):
    return trained_compound_dir


@pytest.fixture(scope="module")
def clf(compound_dir):
    return CompoundClassifier.load(compound_dir)


@pytest.fixture(scope="module")
def cclient(compound_dir):
    app = create_app(ServeConfig(model_dir=str(compound_dir), max_texts=8, max_text_chars=400,
                                 max_wait_ms=2.0))
    with TestClient(app) as c:
        wait_ready(c)
        yield c


def _same(got: list[dict], want: list[dict]) -> None:
    """Served answers equal reference ones: same intents and spans, probabilities 1e-6."""
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g["text"] == w["text"] and g["out_of_scope"] == w["out_of_scope"]
        for key in ("intents", "top_k"):
            assert [k["intent"] for k in g[key]] == [k["intent"] for k in w[key]]
            np.testing.assert_allclose([k["confidence"] for k in g[key]],
                                       [k["confidence"] for k in w[key]], atol=1e-6, rtol=0)
        assert g["slots"] == w["slots"]
        assert (g["decision"] is None) == (w["decision"] is None)
        if g["decision"] is not None:
            assert g["decision"]["score"] == w["decision"]["score"] == "intent_threshold"
            np.testing.assert_allclose(
                [g["decision"]["value"], g["decision"]["threshold"]],
                [w["decision"]["value"], w["decision"]["threshold"]], atol=1e-6, rtol=0)


def test_predict_end_to_end_equals_the_classifier(cclient, clf):
    r = cclient.post("/v1/predict", json={"texts": TEXTS})
    assert r.status_code == 200, r.text
    body = r.json()
    # runtime auto serves it on onnxruntime (its cached export), answering as PyTorch does
    assert body["runtime"] == "onnx" and body["model"] == "model"
    got = body["predictions"]
    want = clf.predict(TEXTS, top_k=3)
    _same(got, [p.to_dict(digits=None) for p in want])
    # the content of Prediction.to_dict() (unrounded), plus the long-text note
    assert set(got[0]) == set(want[0].to_dict()) | {"long_text"}
    assert [g["slots"] for g in got] == [w.to_dict()["slots"] for w in want]
    # the tiny model has learned the corpus: intents and a valued slot
    assert [i["intent"] for i in got[0]["intents"]] == ["transfer"]
    assert {i["intent"] for i in got[1]["intents"]} == {"charge", "refund"}
    assert got[0]["slots"] == [{"name": "amount_of_money", "start": 5, "end": 14,
                                "text": "50 pounds",
                                "value": {"amount": 50.0, "currency": "GBP"}}]
    assert got[2]["out_of_scope"] and got[2]["intents"] == [] and got[2]["slots"] == []
    assert got[-1]["long_text"] == {"policy": "truncated", "max_length": 24, "chunks": 1,
                                    "tokens": got[-1]["long_text"]["tokens"],
                                    "window": 24, "stride": None, "pooling": None,
                                    "chunk": None,
                                "span": None}
    assert got[-1]["long_text"]["tokens"] > 24 and got[0]["long_text"] is None
    one = cclient.post("/v1/predict", json={"texts": TEXTS[0], "top_k": 1}).json()
    assert len(one["predictions"]) == 1 and len(one["predictions"][0]["top_k"]) == 1


def test_metrics_count_each_answered_intent_and_out_of_scope_texts_once(cclient, clf):
    from prometheus_client.parser import text_string_to_metric_families

    def counts() -> tuple[dict, dict]:
        found: dict[str, dict] = {"headwise_answers": {}, "headwise_out_of_scope": {}}
        for family in text_string_to_metric_families(cclient.get("/metrics").text):
            for s in family.samples:
                if family.name in found and s.name == family.name + "_total":
                    found[family.name][next(iter(s.labels.values()))] = s.value
        return found["headwise_answers"], found["headwise_out_of_scope"]

    answers0, oos0 = counts()
    assert set(answers0) == set(clf.intents) | {"out_of_scope"}
    assert set(oos0) == {"intent_threshold"}
    got = cclient.post("/v1/predict", json={"texts": TEXTS}).json()["predictions"]
    assert len(got[1]["intents"]) == 2 and got[2]["out_of_scope"]  # two intents; rejected
    answers, oos = counts()
    for intent in clf.intents:
        n = sum(intent in [i["intent"] for i in g["intents"]] for g in got)
        assert answers[intent] - answers0[intent] == n, intent
    rejected = sum(g["out_of_scope"] for g in got)
    assert answers["out_of_scope"] - answers0["out_of_scope"] == rejected
    assert oos["intent_threshold"] - oos0["intent_threshold"] == rejected


def test_openapi_shows_the_compound_schemas(cclient):
    spec = cclient.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    assert {"CompoundPredictRequest", "PredictResponse", "Prediction", "Decision",
            "Slot"} <= set(schemas)
    assert "at_least_one" in schemas["CompoundPredictRequest"]["properties"]
    assert set(schemas["Slot"]["properties"]) == {"name", "start", "end", "text", "value"}
    ok = spec["paths"]["/v1/predict"]["post"]["responses"]["200"]["content"]
    assert ok["application/json"]["schema"]["$ref"].endswith("/PredictResponse")
    # one answer for every kind: the compound answer has the fields a single-label one has
    assert set(schemas["Prediction"]["properties"]) == {
        "text", "intents", "out_of_scope", "slots", "top_k", "decision", "long_text"}
    assert "compound" in spec["paths"]["/v1/explain"]["post"]["description"]
    assert "ensemble" in spec["paths"]["/v1/explain"]["post"]["description"]


@pytest.mark.parametrize("max_rows", [64, 2])
def test_batched_outputs_equal_unbatched(clf, max_rows, compound_corpus):
    predictor = CompoundPredictor(clf, TorchRuntime(clf.model), max_rows=max_rows)
    texts = [*TEXTS, *[e.text for e in compound_corpus[:12]]]
    items = predictor.encode(texts)
    together = predictor.run(items)
    alone = [predictor.run([item])[0] for item in items]
    np.testing.assert_allclose(predictor.probabilities(texts, together),
                               predictor.probabilities(texts, alone),
                               atol=1e-6, rtol=0)
    for a, b, item in zip(together, alone, items, strict=True):
        np.testing.assert_array_equal(a.tags, b.tags)
        assert len(a.tags) == len(item.chunks[0])
    answers = predictor.answer(texts, items, together, top_k=3)
    _same(answers, [p.to_dict(digits=None) for p in clf.predict(texts, top_k=3)])
    _same(answers, predictor.predict(texts[:1]) + predictor.predict(texts[1:]))


def test_concurrent_http_requests_get_their_unbatched_answers(compound_dir):
    app = create_app(ServeConfig(model_dir=str(compound_dir), max_batch_size=16,
                                 max_wait_ms=20))
    predictor = app.state.serve.predictor
    rng = np.random.default_rng(0)
    requests = [[TEXTS[j] for j in rng.choice(len(TEXTS), size=int(rng.integers(1, 4)))]
                for _ in range(16)]

    responses, metrics = post_concurrently(app, requests)
    for texts, r in zip(requests, responses, strict=True):
        assert r.status_code == 200, r.text
        _same(r.json()["predictions"], predictor.predict(texts, top_k=3))
    batches = [ln for ln in metrics.splitlines() if ln.startswith("headwise_batch_size_count")]
    assert float(batches[0].split()[-1]) < 1 + len(requests)  # some requests shared a pass


def test_threshold_and_at_least_one_overrides(cclient, clf):
    texts = TEXTS[:4]

    def ask(**extra):
        r = cclient.post("/v1/predict", json={"texts": texts, **extra})
        assert r.status_code == 200, r.text
        return r.json()["predictions"]

    everything = ask(threshold=0.0)
    assert all(len(p["intents"]) == len(clf.intents) and not p["out_of_scope"]
               for p in everything)
    nothing = ask(threshold=1.0)
    assert all(p["intents"] == [] and p["out_of_scope"] for p in nothing)
    forced = ask(threshold=1.0, at_least_one=True)
    assert all(len(p["intents"]) == 1 and not p["out_of_scope"] for p in forced)
    assert [p["intents"][0]["intent"] for p in forced] == \
        [p["top_k"][0]["intent"] for p in nothing]
    for t in (0.3, 0.7):
        want = clf.predict(texts, thresholds=Thresholds(t))
        _same(ask(threshold=t), [p.to_dict(digits=None) for p in want])
    assert ask(at_least_one=False) == ask()  # the default keeps the saved thresholds


@pytest.mark.parametrize("body, kind", [
    ({"texts": []}, "validation_error"),
    ({"texts": ["  "]}, "empty_text"),
    ({"texts": ["hi"] * 9}, "too_many_texts"),
    ({"texts": ["x" * 401]}, "text_too_long"),
    ({"texts": "hi", "threshold": 1.5}, "validation_error"),
    ({"texts": "hi", "at_least_one": "yes"}, "validation_error"),
    ({"texts": "hi", "at_least_one": 1}, "validation_error"),
    ({"texts": "hi", "top_k": 0}, "validation_error"),
    ({"texts": "hi", "thresholds": [0.5]}, "validation_error"),
    ({"text": "hi", "texts": "hi"}, "validation_error"),
])
def test_bad_input_is_a_4xx_json_error(cclient, body, kind):
    r = cclient.post("/v1/predict", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["type"] == kind


def test_intent_models_keep_their_request_schema(client):
    r = client.post("/v1/predict", json={"texts": "my balance", "at_least_one": True})
    assert r.status_code == 422 and "at_least_one" in r.json()["error"]["message"]


def test_long_texts_can_be_rejected(compound_dir):
    app = create_app(ServeConfig(model_dir=str(compound_dir), long_text="reject"))
    with TestClient(app) as c:
        wait_ready(c)
        r = c.post("/v1/predict", json={"texts": [TEXTS[0], LONG]})
    assert r.status_code == 422 and r.json()["error"]["type"] == "text_too_long"
    assert "texts[1]" in r.json()["error"]["message"]


def test_explain_answers_and_health_ready_metrics_work(cclient):
    r = cclient.post("/v1/explain", json={"text": TEXTS[0]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert [e["intent"] for e in body["explained"]] == \
        [i["intent"] for i in body["prediction"]["intents"]] == ["transfer"]
    assert [s["name"] for s in body["prediction"]["slots"]] == ["amount_of_money"]
    assert body["completeness"]["within_tolerance"]
    assert cclient.get("/healthz").json() == {"status": "ok", "model": "model",
                                              "runtime": "onnx"}
    assert cclient.get("/readyz").json() == {"status": "ready", "model": "model",
                                             "runtime": "onnx"}
    metrics = cclient.get("/metrics").text
    assert 'headwise_requests_total{endpoint="/v1/predict"' in metrics
    assert "headwise_batch_size_count" in metrics


def test_a_joint_model_without_tagger_and_a_single_label_head(clf):
    torch.manual_seed(0)
    tok = clf.tokenizer
    cfg = ModelConfig(vocab_size=tok.vocab_size, d_model=32, num_layers=1, num_heads=4,
                      d_ff=64, num_labels=3, labels=["a", "b", "c"], max_position=64,
                      pad_token_id=tok.pad_token_id, dropout=0.0,
                      model_type="joint_intent_slot", multi_label=False, slot_tags=None)
    model = JointIntentSlotModel(cfg).eval()
    with torch.no_grad():
        model.classifier.weight.normal_(0, 1.0)
    plain = CompoundClassifier(model, tok, ["a", "b", "c"], thresholds=Thresholds(0.4),
                               max_length=24)
    predictor = CompoundPredictor(plain, TorchRuntime(model), max_rows=3)
    got = predictor.predict(TEXTS, top_k=2)
    _same(got, [p.to_dict(digits=None) for p in plain.predict(TEXTS, top_k=2)])
    assert all(p["slots"] == [] for p in got)


def test_auto_and_onnx_serve_a_compound_classifier_on_onnxruntime(compound_dir, clf):
    """Runtime auto takes the export it caches (with its slot-tag logits), as
    ``--runtime onnx`` does; both answer as the classifier on PyTorch."""
    predictors = {r: load_served_predictor(ServeConfig(model_dir=str(compound_dir), runtime=r,
                                                       warmup=False), report=None)
                  for r in ("auto", "onnx", "torch")}
    assert predictors["auto"].task == "multi_label"
    assert [p.runtime.name for p in predictors.values()] == ["onnx", "onnx", "torch"]
    assert predictors["auto"].runtime.tagged and predictors["onnx"].runtime.tagged
    want = [p.to_dict(digits=None) for p in clf.predict(TEXTS, top_k=3)]
    for p in predictors.values():
        _same(p.predict(TEXTS, top_k=3), want)


def test_unsupported_paths_are_refused(compound_dir, clf, tmp_path, capsys):
    assert main(["serve", str(compound_dir), "--set", "long_text=chunk", "--port", "0"]) == 1
    assert "--set long_text=chunk" in capsys.readouterr().err
    neither = tmp_path / "neither"
    neither.mkdir()
    (neither / "config.json").write_text("{}")
    assert main(["serve", str(neither), "--port", "0"]) == 1
    err = capsys.readouterr().err
    assert "none of intent.json" in err and "compound.json" in err and "tfidf.json" in err
    for policy in ("head_tail", "chunk", "chunk_max", "chunk_in_scope", "chunk_span"):
        with pytest.raises(ValueError, match=f"long_text '{policy}' is not supported"):
            CompoundPredictor(clf, TorchRuntime(clf.model), long_text=policy)


def test_the_engine_follows_the_directory_kind(compound_dir, encoder_dir):
    config = ServeConfig(model_dir=str(compound_dir), long_text="reject")
    # as a worker gets it
    predictor = load_served_predictor(ServeConfig.from_json(config.to_json()))
    assert isinstance(predictor, CompoundPredictor) and predictor.task == "multi_label"
    assert predictor.long_text == "reject" and predictor.labels == predictor.classifier.intents
    assert load_served_predictor(ServeConfig(model_dir=str(encoder_dir))).task == "single_label"


def test_relative_dates_count_from_the_request_reference_date(cclient, monkeypatch):
    from datetime import date

    from headwise.intent.compound.classifier import CompoundClassifier

    seen = []
    real = CompoundClassifier.resolve_slots.__func__

    def spy(cls, spans, reference):
        seen.append(reference)
        return real(cls, spans, reference)

    monkeypatch.setattr(CompoundClassifier, "resolve_slots", classmethod(spy))
    r = cclient.post("/v1/predict", json={"texts": TEXTS[0], "reference_date": "2026-12-01"})
    assert r.status_code == 200 and seen[-1] == date(2026, 12, 1)
    assert cclient.post("/v1/predict", json={"texts": TEXTS[0]}).status_code == 200
    assert seen[-1] == date.today()
    bad = cclient.post("/v1/predict", json={"texts": TEXTS[0], "reference_date": "2026-13-01"})
    assert bad.status_code == 422 and "reference_date" in bad.text
