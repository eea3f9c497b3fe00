"""``/metrics`` counts ``/v1/predict``'s answers by answered intent and its out-of-scope
answers by the deciding score: the counters equal the answers returned, their labels are
the served models' intents and scores only (never a text), and a reload adds the new
model's labels without a counter ever going back."""

from __future__ import annotations

from collections import Counter

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from serve_helpers import wait_ready
from tiny_corpus import INTENTS
from tiny_models import MAX_LENGTH, TEXTS, tiny_encoder, tiny_tokenizer

from headwise.intent.classifier import IntentClassifier
from headwise.serve import ServeConfig, create_app

KEY = "answer-metrics-key-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}
# odd texts too: none of them may ever become a label value
ODD = ['my card "is" gone\\n', "转账给朋友 100 元", "zzqx blorp {intent=\"x\"}"]


def samples(text: str, name: str) -> dict[tuple, float]:
    """The samples of metric family ``name`` (without ``_total``) parsed by
    prometheus_client's own parser: label items -> value."""
    out = {}
    for family in text_string_to_metric_families(text):
        if family.name == name:
            for s in family.samples:
                if s.name == name + "_total":
                    out[tuple(sorted(s.labels.items()))] = s.value
    return out


def by(text: str, name: str, label: str) -> dict[str, float]:
    found = samples(text, name)
    assert all(len(k) == 1 and k[0][0] == label for k in found), found
    return {k[0][1]: v for k, v in found.items()}


def tally(predictions: list[dict]) -> tuple[Counter, Counter]:
    """What the counters should hold after these answers."""
    answers, oos = Counter(), Counter()
    for p in predictions:
        if p["out_of_scope"]:
            answers["out_of_scope"] += 1
            oos[p["decision"]["score"]] += 1
        else:
            answers.update(i["intent"] for i in p["intents"])
    return answers, oos


def test_counters_equal_the_answers_and_their_labels_are_bounded(client):
    known = set(INTENTS) | {"out_of_scope"}
    before = client.get("/metrics").text
    start_answers = by(before, "headwise_answers", "intent")
    start_oos = by(before, "headwise_out_of_scope", "score")
    # every label is exported from the start (at 0 or on), and only those
    assert set(start_answers) == known and set(start_oos) == {"max_prob"}
    want_answers, want_oos = Counter(), Counter()
    bodies = [{"texts": TEXTS[:5]}, {"text": ODD[0]}, {"texts": ODD, "threshold": 1.0},
              {"texts": TEXTS[3:8], "threshold": 0.0}, {"texts": TEXTS[:4] + ODD[1:]}]
    for body in bodies:
        r = client.post("/v1/predict", json=body)
        assert r.status_code == 200
        a, o = tally(r.json()["predictions"])
        want_answers += a
        want_oos += o
    # a refused request answers nothing and counts nothing
    assert client.post("/v1/predict", json={"texts": ["ok", ""]}).status_code == 422
    assert want_oos["max_prob"] >= len(ODD) and want_answers["out_of_scope"] >= len(ODD)
    after = client.get("/metrics").text
    got_answers = by(after, "headwise_answers", "intent")
    got_oos = by(after, "headwise_out_of_scope", "score")
    assert set(got_answers) == known and set(got_oos) == {"max_prob"}
    assert {k: got_answers[k] - start_answers[k] for k in known} == \
        {k: float(want_answers[k]) for k in known}
    assert got_oos["max_prob"] - start_oos["max_prob"] == want_oos["max_prob"]
    texts = set(TEXTS) | set(ODD)
    for family in text_string_to_metric_families(after):
        for s in family.samples:
            assert not texts & set(s.labels.values()), s


@pytest.fixture(scope="module")
def renamed_dir(tmp_path_factory):
    """A tiny model whose intents are named otherwise than ``encoder_dir``'s but one."""
    tok = tiny_tokenizer()
    names = [k if i == 0 else f"new_{k}" for i, k in enumerate(INTENTS)]
    clf = IntentClassifier(tiny_encoder(tok, seed=3), tok, names, threshold=0.4,
                           max_length=MAX_LENGTH)
    return clf.save(tmp_path_factory.mktemp("answer-metrics") / "renamed")


def test_a_reload_adds_the_new_labels_and_no_counter_goes_back(encoder_dir, renamed_dir,
                                                               tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_text(KEY + "\n")
    app = create_app(ServeConfig(model_dir=str(encoder_dir), api_key_file=str(keys),
                                 max_wait_ms=2.0))
    with TestClient(app, headers=AUTH) as c:
        wait_ready(c)
        first = c.post("/v1/predict", json={"texts": TEXTS + ODD}).json()["predictions"]
        want, _ = tally(first)
        old = by(c.get("/metrics").text, "headwise_answers", "intent")
        assert old == {k: float(want[k]) for k in set(INTENTS) | {"out_of_scope"}}
        r = c.post("/admin/reload", json={"model_dir": str(renamed_dir), "keys": False})
        assert r.status_code == 200
        second = c.post("/v1/predict", json={"texts": TEXTS + ODD}).json()["predictions"]
        assert {i["intent"] for p in second for i in p["intents"]} <= \
            set(IntentClassifier.load(renamed_dir).labels)
        more, _ = tally(second)
        new = by(c.get("/metrics").text, "headwise_answers", "intent")
        renamed = set(IntentClassifier.load(renamed_dir).labels)
        assert set(new) == set(old) | renamed
        # old labels keep their counts; a shared one (and out_of_scope) counts on
        for k in set(new):
            assert new[k] == old.get(k, 0.0) + more[k], k
            assert new[k] >= old.get(k, 0.0)
