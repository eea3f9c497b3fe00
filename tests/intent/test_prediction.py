"""The one answer of every model kind (headwise.intent.prediction), against hand-computed
answers: the answered intents, the out-of-scope decision and the score that made it."""

from __future__ import annotations

import json
from datetime import date
from types import SimpleNamespace

import numpy as np
import pytest
from tiny_corpus import INTENTS

from headwise.cli import main
from headwise.intent.compound.classifier import CompoundClassifier
from headwise.intent.compound.thresholds import Thresholds
from headwise.intent.decision.ood import make_detector
from headwise.intent.prediction import (
    OUT_OF_SCOPE,
    OutOfScopeDecision,
    OutOfScopeScores,
    Prediction,
    answers_from_probs,
)
from headwise.intent.tfidf import TfidfClassifier
from headwise.text.dataset import SlotSpan

LABELS = ["a", "b", "c"]


def test_answers_from_probs_by_hand():
    probs = np.array([[0.7, 0.2, 0.1], [0.3, 0.35, 0.35], [0.5, 0.25, 0.25]])
    got = answers_from_probs(["x", "y", "z"], probs, LABELS, top_k=2,
                             scores=OutOfScopeScores.top_probability(probs, 0.5))
    # x: 0.7 >= 0.5, answered; y: 0.35 < 0.5, rejected (ties keep the label order);
    # z: exactly at the threshold, answered
    assert [p.intents for p in got] == [[("a", 0.7)], [], [("a", 0.5)]]
    assert [p.out_of_scope for p in got] == [False, True, False]
    assert [p.intent for p in got] == ["a", OUT_OF_SCOPE, "a"]
    assert got[1].top_k == [("b", 0.35), ("c", 0.35)] and got[1].confidence == 0.35
    assert got[1].decision == OutOfScopeDecision("max_prob", 0.35, 0.5)
    assert got[1].decision.rejects and not got[2].decision.rejects
    assert all(p.slots == [] for p in got)


def test_a_detector_decides_where_it_is_given():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(40, 3)) * 3
    det = make_detector("energy").fit(None, logits, None)
    det.threshold = float(np.median(det.score(None, logits)))
    scores = OutOfScopeScores.of_detector(det, None, logits)
    assert scores.score == "energy" and scores.threshold == det.threshold
    np.testing.assert_array_equal(scores.rejected, det.reject(None, logits))
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    got = answers_from_probs([str(i) for i in range(40)], probs, LABELS, top_k=1,
                             scores=scores)
    assert [p.out_of_scope for p in got] == det.reject(None, logits).tolist()
    # the top probability plays no part: a rejected text can be confident, an answered one not
    assert {p.decision.score for p in got} == {"energy"}
    assert all(p.decision.value == pytest.approx(v) for p, v in zip(got, scores.values,
                                                                    strict=True))
    det.threshold = None
    with pytest.raises(RuntimeError, match="no threshold"):
        OutOfScopeScores.of_detector(det, None, logits)


def test_scores_of_another_length_are_refused():
    probs = np.full((2, 3), 1 / 3)
    with pytest.raises(ValueError, match="scores must be"):
        answers_from_probs(["x", "y"], probs, LABELS, top_k=1,
                           scores=OutOfScopeScores("max_prob", np.zeros(3), 0.5))


def test_to_dict_is_the_json_answer():
    span = SlotSpan("amount", 4, 7, "500", {"amount": 500.0, "currency": "CNY"})
    p = Prediction(text="转账500元", intents=[("transfer", 0.91234567)],
                   top_k=[("transfer", 0.91234567), ("refund", 0.05)], out_of_scope=False,
                   slots=[span], decision=OutOfScopeDecision("max_prob", 0.91234567, 0.4))
    d = p.to_dict()
    assert list(d) == ["text", "intents", "out_of_scope", "slots", "top_k", "decision"]
    assert d["intents"] == [{"intent": "transfer", "confidence": 0.912346}]
    assert d["slots"] == [{"name": "amount", "start": 4, "end": 7, "text": "500",
                           "value": {"amount": 500.0, "currency": "CNY"}}]
    assert d["decision"] == {"score": "max_prob", "value": 0.912346, "threshold": 0.4}
    assert p.to_dict(digits=None)["intents"][0]["confidence"] == 0.91234567
    assert json.loads(json.dumps(d)) == d
    assert Prediction("x", [], [], True).to_dict()["decision"] is None


def _compound(multi_label: bool, thresholds: Thresholds) -> CompoundClassifier:
    """The answering part of a compound classifier (no network: ``answers`` reads the
    intents, thresholds and whether the head is multi-label)."""
    clf = CompoundClassifier.__new__(CompoundClassifier)
    clf.intents = list(LABELS)
    clf.thresholds = thresholds
    clf.model = SimpleNamespace(multi_label=multi_label)
    clf.reference_date = date(2026, 1, 15)
    return clf


def test_compound_answers_every_intent_over_its_threshold_by_hand():
    clf = _compound(True, Thresholds(0.5, per_intent=[0.5, 0.3, 0.9]))
    probs = np.array([[0.8, 0.4, 0.95],   # all three pass their own thresholds
                      [0.4, 0.28, 0.6],   # none passes; b is nearest (0.28 - 0.3)
                      [0.2, 0.35, 0.1]])  # b alone passes (0.35 >= 0.3)
    got = clf.answers(["x", "y", "z"], probs, [[], [], []], top_k=3)
    assert [p.intents for p in got] == [[("c", 0.95), ("a", 0.8), ("b", 0.4)], [],
                                        [("b", 0.35)]]
    assert [p.out_of_scope for p in got] == [False, True, False]
    assert got[1].decision == OutOfScopeDecision("intent_threshold", 0.28, 0.3)
    assert all(p.decision.rejects == p.out_of_scope for p in got)
    # at_least_one answers the best intent of y and has no out-of-scope rule
    forced = clf.answers(["y"], probs[1:2], [[]], top_k=1, at_least_one=True)[0]
    assert forced.intents == [("c", 0.6)] and forced.decision is None
    # one threshold from a request replaces the per-intent ones
    flat = clf.answers(["y"], probs[1:2], [[]], top_k=1, thresholds=Thresholds(0.55))[0]
    assert flat.intents == [("c", 0.6)] and flat.decision == OutOfScopeDecision(
        "intent_threshold", 0.6, 0.55)


def test_compound_single_label_head_answers_its_top_intent():
    clf = _compound(False, Thresholds(0.5))
    probs = np.array([[0.6, 0.3, 0.1], [0.4, 0.35, 0.25]])
    got = clf.answers(["x", "y"], probs, [[], []], top_k=2)
    assert [p.intents for p in got] == [[("a", 0.6)], []]
    assert got[1].decision == OutOfScopeDecision("intent_threshold", 0.4, 0.5)


def test_compound_answers_resolve_slot_values():
    clf = _compound(True, Thresholds(0.5))
    spans = [[SlotSpan("amount_of_money", 5, 8, "500")]]
    got = clf.answers(["send 500 now"], np.array([[0.9, 0.1, 0.1]]), spans, top_k=1)[0]
    assert got.slots and got.slots[0].text == "500" and got.slots[0].value is not None


@pytest.fixture(scope="module")
def tfidf_dir(tmp_path_factory):
    texts = [t for ts in INTENTS.values() for t in ts]
    labels = [k for k, ts in INTENTS.items() for _ in ts]
    clf = TfidfClassifier.fit(texts, labels, c=10.0)
    return clf.save(tmp_path_factory.mktemp("prediction") / "tfidf")


def test_plain_output_names_the_score_that_rejected(tfidf_dir, capsys):
    assert main(["predict", str(tfidf_dir), "zzqx blorp", "--threshold", "1"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "->" in x)
    assert "OUT OF SCOPE" in line and "max_prob" in line and "< threshold 1.000" in line
    assert main(["predict", str(tfidf_dir), "zzqx blorp", "--threshold", "1", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["out_of_scope"] and rec["intents"] == [] and rec["slots"] == []
    assert rec["decision"]["score"] == "max_prob" and rec["decision"]["threshold"] == 1.0
    assert rec["decision"]["value"] == rec["top_k"][0]["confidence"]
    assert main(["predict", str(tfidf_dir), "i lost my card", "--threshold", "0"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "->" in x)
    assert "-> card_lost (" in line
