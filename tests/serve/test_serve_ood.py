"""The service with an out-of-scope detector: the predictor's rows carry the pooled vectors
the detector reads (chunked texts: their windows' mean), its answers equal the
classifier's, ``/v1/predict`` keeps its shape, and onnxruntime decides as PyTorch does."""

from __future__ import annotations

import numpy as np
import pytest
from answers import confidence_of, intent_of
from serve_helpers import wait_ready
from tiny_corpus import INTENTS
from tiny_models import MAX_LENGTH, TEXTS, tiny_encoder, tiny_tokenizer

from headwise.intent.classifier import IntentClassifier
from headwise.intent.inference import OnnxRuntime, SingleLabelPredictor, TorchRuntime
from headwise.intent.posthoc.recalibration import fit_ood_detector
from headwise.onnx.export import export_onnx
from headwise.serve import ServeConfig, create_app

NAMES = list(INTENTS)
LABELS = [k for k, ts in INTENTS.items() for _ in ts]
VALID = (TEXTS[::2] + ["what's the weather like", "tell me a joke", "play some music",
                       "book a table"], LABELS[::2] + ["oos"] * 4)
QUERIES = ["my card is missing", "send money to my friend", "what is my balance",
           "book a table for two tonight", "zzqx blorp", "i lost my card"]
LONG = ("i lost my card yesterday and someone may have taken it so please block it and also "
        "tell me how much money is left in my account")


def classifier_with(detector: str) -> IntentClassifier:
    tok = tiny_tokenizer()
    clf = IntentClassifier(tiny_encoder(tok), tok, NAMES, temperature=1.5, threshold=0.4,
                           max_length=MAX_LENGTH)
    fit_ood_detector(clf, TEXTS, LABELS, *VALID, detector)
    assert clf.ood is not None
    # the queries' median score: some rejected, some not, whatever the random model
    feats, logits = clf.features_and_logits(QUERIES)
    clf.ood.threshold = float(np.median(clf.ood.score(feats, logits)))
    return clf


@pytest.fixture(scope="module")
def knn_clf():
    return classifier_with("knn:2")


@pytest.fixture(scope="module")
def knn_dir(knn_clf, tmp_path_factory):
    return knn_clf.save(tmp_path_factory.mktemp("serve-ood") / "knn")


def _key(records):
    return [(intent_of(r), r["out_of_scope"]) for r in records]


def _decided(clf, texts, *, margin=1e-4):
    """The rows whose detector score is clear of the threshold: there two runtimes whose
    logits agree within 1e-4 must decide alike (a score on the threshold itself, as a
    validation row's tie can put it, flips with float rounding)."""
    score = clf.ood.score(*clf.features_and_logits(texts))
    keep = [i for i, v in enumerate(score) if abs(v - clf.ood.threshold) > margin]
    assert len(keep) >= len(texts) - 1, (score, clf.ood.threshold)
    return keep


def test_engine_rows_carry_the_pooled_vectors_and_answer_as_predict(knn_clf):
    # truncated, as features_and_logits reads them (one query is over the limit)
    predictor = SingleLabelPredictor(knn_clf, TorchRuntime(knn_clf.model), long_text="truncate")
    assert predictor.with_features
    rows = predictor.run(predictor.encode(QUERIES))
    feats, logits = knn_clf.features_and_logits(QUERIES)
    # logits, pooled vector, the deciding window (0: each query is one window)
    assert rows[0].shape == (len(NAMES) + feats.shape[1] + 1,)
    np.testing.assert_allclose(np.stack(rows)[:, :len(NAMES)], logits, atol=1e-5)
    np.testing.assert_allclose(np.stack(rows)[:, len(NAMES):-1], feats, atol=1e-5)
    assert not np.stack(rows)[:, -1].any()
    records = predictor.predict(QUERIES, top_k=2)
    # predict's answers where the policies agree: the queries within the limit
    within = [i for i, n in enumerate(knn_clf.tokenizer.lengths(QUERIES)) if n <= MAX_LENGTH]
    assert 0 < len(within) < len(QUERIES)
    answers = knn_clf.predict([QUERIES[i] for i in within], top_k=2)
    assert [_key(records)[i] for i in within] == [(a.intent, a.out_of_scope) for a in answers]
    want = knn_clf.ood.score(feats, None) < knn_clf.ood.threshold
    assert [r["out_of_scope"] for r in records] == want.tolist()
    assert 0 < want.sum() < len(QUERIES)
    assert [intent_of(r) for r in records if not r["out_of_scope"]] == \
        [NAMES[i] for i in logits.argmax(1)[~want]]
    for i, a in zip(within, answers, strict=True):
        assert confidence_of(records[i]) == pytest.approx(a.confidence, abs=1e-6)
    # the explain endpoint's path: logits alone, the predictor runs the texts again
    again = predictor.answer(QUERIES, predictor.encode(QUERIES), logits, top_k=2)
    assert _key(again) == _key(records)
    # an explicit threshold is the top-probability rule
    none = predictor.predict(QUERIES, threshold=0.0)
    assert not any(r["out_of_scope"] for r in none)


def test_a_chunked_text_is_scored_on_its_windows_mean(knn_clf):
    predictor = SingleLabelPredictor(knn_clf, TorchRuntime(knn_clf.model), long_text="chunk")
    item = predictor.encode([LONG])[0]
    assert len(item.chunks) > 1
    runtime = TorchRuntime(knn_clf.model)
    pooled = np.stack([runtime.forward(np.array([w]), np.ones((1, len(w))))[1][0]
                       for w in item.chunks]).astype(np.float64).mean(0)
    row = predictor.run([item])[0]
    np.testing.assert_allclose(row[len(NAMES):-1], pooled, atol=1e-5)
    record = predictor.answer([LONG], [item], np.stack([row]), top_k=1)[0]
    want = bool(knn_clf.ood.score(pooled[None], None)[0] < knn_clf.ood.threshold)
    assert record["out_of_scope"] == want and record["long_text"]["policy"] == "chunked"


def test_a_logits_only_detector_keeps_logit_rows():
    clf = classifier_with("energy")
    predictor = SingleLabelPredictor(clf, TorchRuntime(clf.model))
    assert not predictor.with_features
    # logits and the deciding window, no pooled vector
    assert predictor.run(predictor.encode(QUERIES))[0].shape == (len(NAMES) + 1,)
    assert _key(predictor.predict(QUERIES)) == \
        [(a.intent, a.out_of_scope) for a in clf.predict(QUERIES)]


def test_onnx_runtime_decides_as_torch(knn_clf, tmp_path):
    path = export_onnx(knn_clf.model, tmp_path / "m.onnx", max_length=MAX_LENGTH)
    onnx = SingleLabelPredictor(knn_clf, OnnxRuntime(path))
    torch_predictor = SingleLabelPredictor(knn_clf, TorchRuntime(knn_clf.model))
    a = np.stack(onnx.run(onnx.encode(QUERIES)))
    b = np.stack(torch_predictor.run(torch_predictor.encode(QUERIES)))
    np.testing.assert_allclose(a, b, atol=1e-4)
    keep = _decided(knn_clf, QUERIES)
    got, want = _key(onnx.predict(QUERIES)), _key(torch_predictor.predict(QUERIES))
    assert [got[i] for i in keep] == [want[i] for i in keep]


@pytest.mark.parametrize("runtime", ["torch", "onnx"])
def test_predict_endpoint_applies_the_detector_and_keeps_its_shape(knn_clf, knn_dir,
                                                                   encoder_dir, runtime):
    from fastapi.testclient import TestClient

    if runtime == "onnx":
        export_onnx(knn_clf.model, knn_dir / "model.onnx", max_length=MAX_LENGTH)
    app = create_app(ServeConfig(model_dir=str(knn_dir), runtime=runtime, max_wait_ms=2.0))
    plain = create_app(ServeConfig(model_dir=str(encoder_dir), runtime="torch",
                                   max_wait_ms=2.0))
    with TestClient(app) as c, TestClient(plain) as p:
        wait_ready(c)
        wait_ready(p)
        body = c.post("/v1/predict", json={"texts": QUERIES, "top_k": 2}).json()
        other = p.post("/v1/predict", json={"texts": QUERIES, "top_k": 2}).json()
        assert body["runtime"] == runtime
        assert set(body) == set(other)
        for r, o in zip(body["predictions"], other["predictions"], strict=True):
            assert set(r) == set(o) and len(r["top_k"]) == 2
        answers = knn_clf.predict(QUERIES, top_k=2)
        got = _key(body["predictions"])
        want = [(a.intent, a.out_of_scope) for a in answers]
        keep = _decided(knn_clf, QUERIES) if runtime == "onnx" else range(len(QUERIES))
        assert [got[i] for i in keep] == [want[i] for i in keep]
        explained = c.post("/v1/explain", json={"text": QUERIES[4]}).json()["prediction"]
        assert explained["out_of_scope"] == answers[4].out_of_scope
        zero = c.post("/v1/predict", json={"texts": QUERIES, "threshold": 0.0}).json()
        assert not any(r["out_of_scope"] for r in zero["predictions"])


def test_metrics_count_rejections_by_the_detector_or_the_request_threshold(knn_dir):
    from fastapi.testclient import TestClient
    from prometheus_client.parser import text_string_to_metric_families

    app = create_app(ServeConfig(model_dir=str(knn_dir), runtime="torch", max_wait_ms=2.0))
    with TestClient(app) as c:
        wait_ready(c)
        by_detector = c.post("/v1/predict", json={"texts": QUERIES}).json()["predictions"]
        by_threshold = c.post("/v1/predict", json={"texts": QUERIES, "threshold": 0.99}
                              ).json()["predictions"]
        oos = {}
        for family in text_string_to_metric_families(c.get("/metrics").text):
            if family.name == "headwise_out_of_scope":
                oos = {s.labels["score"]: s.value for s in family.samples
                       if s.name.endswith("_total")}
    assert oos == {"knn": float(sum(p["out_of_scope"] for p in by_detector)),
                   "max_prob": float(sum(p["out_of_scope"] for p in by_threshold))}
    assert oos["knn"] > 0
