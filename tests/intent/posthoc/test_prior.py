"""Prior correction (logit adjustment): the prior, the choice of tau against a hand-written
macro-F1, the correction folded into a TF-IDF model's and a network's bias, the
cross-validated choice of C and tau against scikit-learn's own cross-validation, and the
recipe fields."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny_corpus import INTENTS

from headwise.intent import IntentRecipe, train_intent_classifier
from headwise.intent.classifier import IntentClassifier
from headwise.intent.kinds import load_classifier
from headwise.intent.posthoc.prior import (
    TAUS,
    apply_prior_correction,
    choose_tau,
    correct_on_validation,
    log_prior,
)
from headwise.intent.tfidf import TfidfClassifier
from headwise.intent.training.tfidf_selection import fit_tfidf, fit_tfidf_selected
from headwise.models import EncoderClassifier, ModelConfig
from headwise.text.tokenizer import Tokenizer

ROWS = [(t, k) for k, ts in INTENTS.items() for t in ts]


def _network() -> IntentClassifier:
    """A random-weight encoder classifier over the tiny corpus (no training needed)."""
    tok = Tokenizer.train_wordpiece([t for t, _ in ROWS] * 3, 120, min_frequency=1)
    torch.manual_seed(0)
    model = EncoderClassifier(ModelConfig(
        vocab_size=tok.vocab_size, d_model=32, num_layers=1, num_heads=4, d_ff=64,
        num_labels=len(INTENTS), labels=list(INTENTS), max_position=64,
        pad_token_id=tok.pad_token_id, dropout=0.0)).eval()
    with torch.no_grad():
        model.classifier.weight.normal_(0, 1.0)
    return IntentClassifier(model, tok, list(INTENTS), max_length=32)


def _macro_f1(gold, pred, classes):
    """Macro-F1 by hand: the mean over the classes present in gold or pred."""
    f1s = []
    for c in sorted(set(gold) | set(pred)):
        tp = sum(g == c and p == c for g, p in zip(gold, pred, strict=True))
        fp = sum(g != c and p == c for g, p in zip(gold, pred, strict=True))
        fn = sum(g == c and p != c for g, p in zip(gold, pred, strict=True))
        f1s.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
    return sum(f1s) / len(f1s)


def test_log_prior_is_add_one_smoothed():
    got = log_prior(["a", "a", "a", "b"], ["a", "b", "c"])
    np.testing.assert_allclose(np.exp(got), [4 / 7, 2 / 7, 1 / 7], rtol=1e-12)


def test_choose_tau_maximises_a_hand_computed_macro_f1():
    rng = np.random.default_rng(0)
    gold = np.array([0] * 30 + [1] * 6 + [2] * 4)
    logits = rng.normal(size=(40, 3))
    logits[np.arange(40), gold] += 2.5
    logits[:, 0] += 2.0  # a model leaning towards the frequent intent
    prior = log_prior([str(g) for g in gold], ["0", "1", "2"])
    choice = choose_tau(logits, gold, prior)
    want = {t: _macro_f1(list(gold), list((logits - t * prior).argmax(1)), 3) for t in TAUS}
    assert choice.scores == pytest.approx(want, abs=1e-12)
    best = max(want.values())
    assert choice.tau == min(t for t, f in want.items() if f == best)
    assert choice.tau > 0 and choice.scores[choice.tau] > choice.scores[0.0]
    assert choice.rows == 40 and choice.to_dict()["tau"] == choice.tau
    with pytest.raises(ValueError, match="do not fit"):
        choose_tau(logits[:, :2], gold, prior)
    with pytest.raises(ValueError, match="taus"):
        choose_tau(logits, gold, prior, taus=[-0.5])


def test_the_correction_is_folded_into_a_tfidf_models_intercept():
    texts, labels = zip(*ROWS, strict=True)
    clf = TfidfClassifier.fit(texts, labels)
    probe = ["my card is gone", "send 20 to mum"]
    before = clf.logits(probe)
    prior = np.log([0.5, 0.3, 0.2])
    record = apply_prior_correction(clf, prior, 0.75)
    np.testing.assert_allclose(clf.logits(probe), before - 0.75 * prior, atol=1e-12)
    assert record["tau"] == 0.75 and clf.info["prior_correction"] is record
    with pytest.raises(ValueError, match="does not fit"):
        apply_prior_correction(clf, prior[:2], 0.5)
    with pytest.raises(ValueError, match="tau"):
        apply_prior_correction(clf, prior, -1.0)


def test_the_correction_is_folded_into_a_networks_head(tmp_path):
    clf = _network()
    probe = ["i lost my card", "what is my balance"]
    before = clf.logits(probe)
    prior = np.log([0.6, 0.3, 0.1])
    apply_prior_correction(clf, prior, 1.0)
    np.testing.assert_allclose(clf.logits(probe), before - prior, atol=1e-5)
    back = load_classifier(clf.save(tmp_path / "m"))  # the export carries it
    np.testing.assert_allclose(back.logits(probe), before - prior, atol=1e-5)

    class Headless:
        labels, info, model = ["a", "b"], {}, torch.nn.Identity()

    with pytest.raises(TypeError, match="no biased linear head"):
        apply_prior_correction(Headless(), np.zeros(2), 0.5)


def test_correct_on_validation_settings():
    clf = _network()
    texts, labels = zip(*ROWS, strict=True)
    assert correct_on_validation(clf, labels, texts, labels, "none") is None
    assert correct_on_validation(clf, labels, texts, labels, 0.5)["tau"] == 0.5
    rec = correct_on_validation(clf, labels, texts, labels, "auto")
    assert rec["choice"]["rows"] == len(texts) and rec["tau"] in TAUS
    with pytest.raises(ValueError, match="no validation row"):
        correct_on_validation(clf, labels, ["x"], ["unknown"], "auto")


def test_cross_validated_choice_matches_scikit_learn():
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline

    from headwise.intent.training.cleaning import tfidf_features

    rows = ROWS + [("card please", "card_lost"), ("balance please", "balance")]
    texts, labels = [t for t, _ in rows], [y for _, y in rows]
    intents = sorted(set(labels))
    gold = np.searchsorted(intents, labels)
    prior = log_prior(labels, intents)
    want = {}
    for c in (0.5, 10.0):
        model = make_pipeline(tfidf_features(False), LogisticRegression(C=c, max_iter=2000))
        probs = cross_val_predict(model, texts, gold, method="predict_proba",
                                  cv=StratifiedKFold(3, shuffle=True, random_state=4))
        for t in TAUS:
            want[(c, t)] = _macro_f1(list(gold), list((np.log(probs) - t * prior).argmax(1)), 3)
    clf = fit_tfidf_selected(texts, labels, cs=(0.5, 10.0), folds=3, seed=4)
    sel = clf.info["selection"]
    for (c, t), f in want.items():
        assert sel["candidates"][str(c)][str(t)] == pytest.approx(f, abs=1e-4)
    best = max(want.values())
    assert want[(sel["c"], sel["tau"])] == best and sel["by"].startswith("3-fold")
    plain = TfidfClassifier.fit(texts, labels, c=sel["c"])
    np.testing.assert_allclose(clf.coef, plain.coef, atol=1e-10)
    np.testing.assert_allclose(clf.intercept, plain.intercept - sel["tau"] * prior, atol=1e-10)
    fixed = fit_tfidf(texts, labels, c=10.0, prior_correction=0.5)
    np.testing.assert_allclose(fixed.intercept, TfidfClassifier.fit(
        texts, labels, c=10.0).intercept - 0.5 * prior, atol=1e-10)
    with pytest.raises(ValueError, match="positive"):
        fit_tfidf_selected(texts, labels, cs=())


def test_cross_validation_leaves_out_single_example_intents():
    texts = [t for t, _ in ROWS] + ["close my account"]
    labels = [y for _, y in ROWS] + ["close"]
    clf = fit_tfidf_selected(texts, labels, cs=(10.0,), folds=3, progress=True)
    assert clf.info["selection"]["cv_rows"] == len(ROWS) and "close" in clf.labels
    with pytest.raises(ValueError, match="two intents"):
        fit_tfidf_selected(["a b", "a c", "d e"], ["x", "x", "y"], cs=(1.0,))


@pytest.mark.parametrize("fields,match", [
    ({"decision": {"prior_correction": "yes"}}, r"decision\.prior_correction"),
    ({"decision": {"prior_correction": -0.5}}, r"decision\.prior_correction"),
    ({"decision": {"prior_correction": True}}, r"decision\.prior_correction"),
    ({"architecture": {"type": "tfidf", "c": [1.0, 0.0]}}, r"architecture\.c must be"),
])
def test_recipe_rejects_bad_settings(fields, match):
    with pytest.raises(ValueError, match=match):
        IntentRecipe.from_dict(fields)


def test_recipe_trains_with_prior_correction(tmp_path):
    rows = ROWS * 2
    run = train_intent_classifier(rows, ROWS, IntentRecipe.from_dict(
        {"architecture": {"type": "tfidf", "c": [1.0, 10.0]}, "train": {"progress": False},
         "decision": {"prior_correction": "auto"}}), out_dir=tmp_path / "tfidf")
    info = load_classifier(tmp_path / "tfidf").info
    assert info["selection"]["c"] in (1.0, 10.0) and info["selection"]["tau"] in TAUS
    assert info["prior_correction"]["tau"] == info["selection"]["tau"]
    assert run.valid_metrics["accuracy"] == 1.0
    net = IntentRecipe.from_dict(
        {"architecture": {"d_model": 32, "num_layers": 1, "num_heads": 4, "vocab_size": 100},
         "train": {"epochs": 1, "batch_size": 8, "progress": False},
         "decision": {"prior_correction": "auto"}})
    with pytest.raises(ValueError, match="validation data"):
        train_intent_classifier(rows, None, net.replace(valid_fraction=0.0),
                                out_dir=tmp_path / "none")
    assert not (tmp_path / "none").exists()
    run = train_intent_classifier(rows, ROWS, net, out_dir=tmp_path / "net")
    rec = load_classifier(tmp_path / "net").info["prior_correction"]
    assert rec["tau"] in TAUS and rec["choice"]["rows"] == len(ROWS)


def test_train_command_reports_the_choice(tmp_path, capsys):
    from headwise.cli import main

    data = tmp_path / "train.csv"
    data.write_text("text,label\n" + "".join(f"{t},{k}\n" for t, k in ROWS * 3))
    cfg = tmp_path / "tfidf.json"
    cfg.write_text('{"architecture": {"c": [1.0, 10.0]}, '
                   '"decision": {"prior_correction": "auto"}}')
    assert main(["train", "--data", str(data), "--model", "tfidf", "--config", str(cfg),
                 "--out", str(tmp_path / "t"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "chosen by 5-fold out-of-fold macro-F1: C " in out and "prior correction tau" in out
    cfg.write_text('{"decision": {"prior_correction": 0.5}}')
    assert main(["train", "--data", str(data), "--model", "tfidf", "--config", str(cfg),
                 "--out", str(tmp_path / "f"), "--quiet"]) == 0
    assert "prior correction tau 0.5" in capsys.readouterr().out
    cfg.write_text('{"prior_correction": "maybe"}')
    assert main(["train", "--data", str(data), "--model", "tfidf", "--config", str(cfg),
                 "--out", str(tmp_path / "bad"), "--quiet"]) == 1
    assert "prior_correction" in capsys.readouterr().err
