"""IntentClassifier: calibrated top-k against a hand softmax, out-of-scope, save/load."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from headwise.intent import OUT_OF_SCOPE, IntentClassifier
from headwise.models.config import preset
from headwise.models.encoder import EncoderClassifier
from headwise.text.tokenizer import Tokenizer

TEXTS = ["card lost yesterday", "transfer money to my friend", "what is my balance",
         "i lost my card", "balance please"]


@pytest.fixture(scope="module")
def clf():
    torch.manual_seed(0)
    tok = Tokenizer.train_wordpiece(TEXTS * 3, vocab_size=120)
    model = EncoderClassifier(preset("tiny", vocab_size=tok.vocab_size, num_labels=3,
                                     pad_token_id=tok.pad_token_id, pooling="mean"))
    return IntentClassifier(model, tok, ["card_lost", "transfer", "balance"], temperature=1.7,
                            threshold=0.0)


def test_probabilities_are_the_tempered_softmax_of_the_model(clf):
    batch = clf.tokenizer(TEXTS)
    with torch.no_grad():
        logits = clf.model(batch["input_ids"], batch["attention_mask"].bool())["logits"].double()
    want = torch.softmax(logits / 1.7, -1).numpy()
    np.testing.assert_allclose(clf.predict_proba(TEXTS), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(clf.predict_proba(TEXTS, batch_size=2), want, rtol=1e-5,
                               atol=1e-6)  # batching by length does not change answers


def test_top_k_order_and_out_of_scope(clf):
    probs = clf.predict_proba(TEXTS)
    answers = clf.predict(TEXTS, top_k=2)
    for a, p in zip(answers, probs, strict=True):
        assert [k for k, _ in a.top_k] == [clf.labels[i] for i in np.argsort(-p)[:2]]
        assert a.confidence == pytest.approx(p.max()) and not a.out_of_scope
        # one answered intent, the top one; the decision is the top probability's
        assert a.intents == a.top_k[:1] and a.intent == a.top_k[0][0]
        assert a.decision.score == "max_prob" and a.decision.value == pytest.approx(p.max())
        assert a.decision.threshold == clf.threshold and not a.decision.rejects
    high = clf.predict(TEXTS, threshold=1.0)
    assert all(a.out_of_scope and a.intent == OUT_OF_SCOPE and a.intents == [] for a in high)
    # a rejection says which score decided, its value and the threshold it fell below
    assert all(a.decision.rejects and a.decision.threshold == 1.0
               and a.decision.value == pytest.approx(a.confidence) for a in high)
    assert len(clf.predict("balance", top_k=10)[0].top_k) == 3
    d = answers[0].to_dict()
    assert set(d) == {"text", "intents", "out_of_scope", "slots", "top_k", "decision"}
    assert d["intents"] == [{"intent": a.intent, "confidence": round(a.confidence, 6)}
                            for a in answers[:1]] and d["slots"] == []
    assert d["decision"] == {"score": "max_prob", "value": round(probs[0].max(), 6),
                             "threshold": clf.threshold}


def test_bad_input(clf):
    with pytest.raises(ValueError, match="no texts"):
        clf.predict([])
    with pytest.raises(ValueError, match="batch_size .* at least 1, got 0"):
        clf.predict(["ok"], batch_size=0)
    with pytest.raises(ValueError, match="empty"):
        clf.predict(["ok", "  "])
    with pytest.raises(TypeError):
        clf.predict(["ok", 3])
    with pytest.raises(ValueError, match="top_k"):
        clf.predict("ok", top_k=0)
    with pytest.raises(ValueError, match="classes"):
        IntentClassifier(clf.model, clf.tokenizer, ["a", "b"])


def test_save_load_round_trip(clf, tmp_path):
    clf.threshold = 0.4
    clf.save(tmp_path / "m")
    back = IntentClassifier.load(tmp_path / "m")
    assert back.labels == clf.labels and back.temperature == clf.temperature
    assert back.threshold == 0.4
    np.testing.assert_array_equal(back.predict_proba(TEXTS), clf.predict_proba(TEXTS))
    meta = json.loads((tmp_path / "m" / "intent.json").read_text())
    assert meta["format"] == "headwise-intent"


def test_load_errors(tmp_path, clf):
    with pytest.raises(FileNotFoundError, match="no model directory"):
        IntentClassifier.load(tmp_path / "nope")
    (tmp_path / "x").mkdir()
    with pytest.raises(FileNotFoundError, match="intent.json"):
        IntentClassifier.load(tmp_path / "x")
    clf.save(tmp_path / "y")
    (tmp_path / "y" / "intent.json").write_text("{broken")
    with pytest.raises(ValueError, match="not a valid intent file"):
        IntentClassifier.load(tmp_path / "y")


def test_the_shared_bases_are_abstract_and_a_subclass_gets_predict_from_its_logits():
    from headwise.intent.answering import CalibratedClassifier, ProbabilityClassifier

    with pytest.raises(TypeError, match="abstract"):
        ProbabilityClassifier()
    with pytest.raises(TypeError, match="abstract"):
        CalibratedClassifier()

    class Fixed(CalibratedClassifier):  # logits given by hand
        def __init__(self) -> None:
            self._set_calibration(["a", "b"], 2.0, 0.6, None)

        def logits(self, texts, *, batch_size=64):
            return np.array([[2.0, 0.0]] * len(texts))

    p = 1 / (1 + np.exp(-1.0))  # softmax([2, 0] / 2)[0]
    (answer,) = Fixed().predict("x", top_k=2)
    assert answer.intent == "a" and answer.confidence == pytest.approx(p)
    assert [k for k, _ in answer.top_k] == ["a", "b"]
    (strict,) = Fixed().predict("x", threshold=0.9)
    assert strict.out_of_scope and strict.intent == OUT_OF_SCOPE
