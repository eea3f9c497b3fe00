"""An out-of-scope detector inside a classifier: fitted on training rows, its threshold
chosen on validation rows, deciding ``predict``'s answers, saved and loaded, re-chosen by
``recalibrate`` / ``headwise calibrate``, and chosen by the recipe. References: the pooled
vectors computed one text at a time, scikit-learn's NearestNeighbors and covariance, and
the threshold rule applied by hand."""

from __future__ import annotations

import csv
import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from scipy.special import logsumexp, softmax
from sklearn.covariance import EmpiricalCovariance
from sklearn.neighbors import NearestNeighbors
from tiny_corpus import INTENTS

from headwise.cli import main
from headwise.intent import IntentRecipe, train_intent_classifier
from headwise.intent.classifier import IntentClassifier
from headwise.intent.decision.ood import (
    OOD_ARRAYS,
    OOD_FILE,
    EnergyDetector,
    KnnDetector,
    make_detector,
)
from headwise.intent.decision.oos import choose_score_threshold
from headwise.intent.posthoc.recalibration import fit_ood_detector, recalibrate, save_calibration
from headwise.intent.prediction import OUT_OF_SCOPE
from headwise.intent.tfidf import TfidfClassifier
from headwise.models import EncoderClassifier, ModelConfig
from headwise.text.tokenizer import Tokenizer

NAMES = list(INTENTS)
TEXTS = [t for ts in INTENTS.values() for t in ts]
LABELS = [k for k, ts in INTENTS.items() for _ in ts]
VALID = (["lost my card today", "send cash to my brother", "what is left in my account",
          "card gone", "what's the weather like", "tell me a joke", "play some music"],
         ["card_lost", "transfer", "balance", "card_lost", "oos", "oos", "oos"])
QUERIES = ["my card is missing", "transfer money to mum", "how much is my balance",
           "book a table for two", "zzqx blorp", "i lost my card"]


def tiny_classifier(seed: int = 0) -> IntentClassifier:
    tok = Tokenizer.train_wordpiece(TEXTS * 3, 120, min_frequency=1)
    torch.manual_seed(seed)
    cfg = ModelConfig(vocab_size=tok.vocab_size, d_model=32, num_layers=1, num_heads=4,
                      d_ff=64, num_labels=len(NAMES), labels=NAMES, max_position=64,
                      pad_token_id=tok.pad_token_id, dropout=0.0)
    model = EncoderClassifier(cfg).eval()
    with torch.no_grad():
        model.classifier.weight.normal_(0, 1.0)
    # max_length 64: every query is read whole (a long text is windowed, test_long_text.py)
    return IntentClassifier(model, tok, NAMES, temperature=1.3, threshold=0.4, max_length=64)


@torch.inference_mode()
def one_at_a_time(clf: IntentClassifier, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The reference: each text alone (no padding), pooled vector and the head on it."""
    feats, logits = [], []
    for t in texts:
        b = clf.tokenizer([t], max_length=clf.max_length)
        mask = b["attention_mask"].bool()
        pooled = clf.model.pool(clf.model.encode(b["input_ids"], mask), mask)
        feats.append(pooled[0].double().numpy())
        logits.append(clf.model(input_ids=b["input_ids"], attention_mask=mask)["logits"][0]
                      .double().numpy())
    return np.stack(feats), np.stack(logits)


def _write(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("text", "label"), *rows])
    return path


def test_features_and_logits_are_the_forward_pass():
    clf = tiny_classifier()
    feats, logits = clf.features_and_logits(QUERIES + TEXTS, batch_size=4)
    ref_f, ref_l = one_at_a_time(clf, QUERIES + TEXTS)
    np.testing.assert_allclose(feats, ref_f, atol=1e-5)
    np.testing.assert_allclose(logits, ref_l, atol=1e-5)
    np.testing.assert_allclose(logits, clf.logits(QUERIES + TEXTS), atol=1e-5)


def test_knn_detector_is_chosen_on_validation_and_decides_predict():
    clf = tiny_classifier()
    choice = fit_ood_detector(clf, TEXTS, LABELS, *VALID, "knn:3")
    assert isinstance(clf.ood, KnnDetector) and clf.ood.k == 3
    # the reference: NearestNeighbors on the unit pooled vectors, the rule by hand
    unit = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
    train_f, _ = one_at_a_time(clf, TEXTS)
    nn = NearestNeighbors(n_neighbors=3).fit(unit(train_f))
    v_f, v_l = one_at_a_time(clf, VALID[0])
    v_score = -nn.kneighbors(unit(v_f))[0][:, -1]
    gold = np.array([NAMES.index(y) if y in NAMES else -1 for y in VALID[1]])
    ref = choose_score_threshold(v_score, v_l.argmax(1) == gold, gold < 0, name="knn")
    assert choice.threshold == pytest.approx(ref.threshold, abs=1e-5)
    assert choice.in_scope_accuracy == ref.in_scope_accuracy
    assert choice.oos_recall == ref.oos_recall and choice.score == "knn"
    assert clf.info["ood"]["detector"] == "knn" and clf.info["ood"]["stored"]
    assert clf.info["ood"]["valid"]["threshold"] == choice.threshold
    assert clf.info["ood"]["fit_rows"] == len(TEXTS)
    # predict: out-of-scope where the kNN score is below the threshold; confidences as ever
    # (the threshold moved to the queries' median, so that some are rejected and some not
    # whatever the tiny model learnt)
    q_f, q_l = one_at_a_time(clf, QUERIES)
    q_score = -nn.kneighbors(unit(q_f))[0][:, -1]
    clf.ood.threshold = float(np.median(q_score))
    answers = clf.predict(QUERIES, top_k=2)
    want = q_score < clf.ood.threshold
    assert [a.out_of_scope for a in answers] == want.tolist()
    assert 0 < want.sum() < len(QUERIES)
    probs = softmax(q_l / clf.temperature, axis=1)
    for a, p, w in zip(answers, probs, want, strict=True):
        assert a.confidence == pytest.approx(p.max(), abs=1e-6)
        assert a.intent == (OUT_OF_SCOPE if w else NAMES[p.argmax()])
        assert len(a.top_k) == 2
    # an explicit threshold is the top-probability rule: 0 never rejects
    assert not any(a.out_of_scope for a in clf.predict(QUERIES, threshold=0.0))
    at = clf.predict(QUERIES, threshold=0.5)
    assert [a.out_of_scope for a in at] == (probs.max(1) < 0.5).tolist()


def test_save_and_load_keep_the_detector_and_a_plain_save_removes_it(tmp_path):
    clf = tiny_classifier()
    fit_ood_detector(clf, TEXTS, LABELS, *VALID, "mahalanobis")
    out = clf.save(tmp_path / "m")
    meta = json.loads((out / "intent.json").read_text())
    assert meta["ood_detector"] == "mahalanobis"
    assert (out / OOD_FILE).is_file() and (out / OOD_ARRAYS).is_file()
    back = IntentClassifier.load(out)
    assert back.ood.name == "mahalanobis" and back.ood.threshold == clf.ood.threshold
    assert [a.to_dict() for a in back.predict(QUERIES)] == \
        [a.to_dict() for a in clf.predict(QUERIES)]
    # without a detector: the files go, and the loaded classifier uses its threshold
    clf.ood = None
    clf.save(out)
    assert not (out / OOD_FILE).exists() and not (out / OOD_ARRAYS).exists()
    assert "ood_detector" not in json.loads((out / "intent.json").read_text())
    plain = IntentClassifier.load(out)
    assert plain.ood is None
    conf = softmax(plain.logits(QUERIES) / plain.temperature, axis=1).max(1)
    assert [a.out_of_scope for a in plain.predict(QUERIES)] == (conf < 0.4).tolist()
    # an intent.json that names no detector ignores stray detector files (an older save)
    det = EnergyDetector().fit(None, plain.logits(TEXTS), None)
    det.threshold = 100.0  # would reject everything
    from headwise.intent.decision.ood import save_detector

    save_detector(det, out)
    assert IntentClassifier.load(out).ood is None


def test_a_classifier_refuses_unusable_detectors():
    clf = tiny_classifier()
    with pytest.raises(ValueError, match="fitted and have a threshold"):
        clf.ood = make_detector("knn")
    other = EnergyDetector().fit(None, np.zeros((2, 5)), None)
    other.threshold = 0.0
    with pytest.raises(ValueError, match="5 intents"):
        clf.ood = other
    with pytest.raises(TypeError, match="OodDetector"):
        clf.ood = "knn"


def test_tfidf_and_ensembles_keep_max_prob():
    tfidf = TfidfClassifier.fit(TEXTS * 2, LABELS * 2, c=10.0)
    with pytest.raises(ValueError, match="keeps the max_prob"):
        fit_ood_detector(tfidf, TEXTS, LABELS, *VALID, "energy")
    fit_ood_detector(tfidf, TEXTS, LABELS, *VALID, "max_prob")  # allowed: nothing stored
    assert tfidf.info["ood"]["detector"] == "max_prob" and tfidf.ood is None
    with pytest.raises(ValueError, match="TF-IDF"):
        IntentRecipe.from_dict({
            "architecture": {"type": "tfidf"},
            "decision": {"ood_detector": "knn"}})
    with pytest.raises(ValueError, match="out-of-scope detector"):
        IntentRecipe.from_dict({"decision": {"ood_detector": "odin"}})
    assert IntentRecipe.from_dict({"decision": {"ood_detector": "knn:5"}}).decision.ood_detector \
        == "knn:5"


def test_no_validation_rows_store_no_detector():
    clf = tiny_classifier()
    assert fit_ood_detector(clf, TEXTS, LABELS, ["hello"], ["greeting"], "knn") is None
    assert clf.ood is None and clf.info["ood"]["stored"] is False


def test_recalibrate_rechooses_the_detector_threshold(tmp_path):
    clf = tiny_classifier()
    fit_ood_detector(clf, TEXTS, LABELS, *VALID, "mahalanobis")
    out = clf.save(tmp_path / "m")
    arrays = (out / OOD_ARRAYS).read_bytes()
    held = (QUERIES + TEXTS[::3], ["card_lost", "transfer", "balance", "oos", "oos",
                                   "card_lost"] + LABELS[::3])
    r = recalibrate(clf, *held)
    # the reference: scikit-learn's Mahalanobis distance under the shared covariance
    train_f, _ = one_at_a_time(clf, TEXTS)
    y = np.array([NAMES.index(x) for x in LABELS])
    means = np.stack([train_f[y == c].mean(0) for c in range(3)])
    cov = EmpiricalCovariance(assume_centered=True).fit(train_f - means[y])
    h_f, h_l = one_at_a_time(clf, held[0])
    score = -np.stack([cov.mahalanobis(h_f - m) for m in means], 1).min(1)
    gold = np.array([NAMES.index(x) if x in NAMES else -1 for x in held[1]])
    ref = choose_score_threshold(score, h_l.argmax(1) == gold, gold < 0)
    assert r.ood.score == "mahalanobis" and r.ood.method == "balanced"
    assert r.ood.in_scope_accuracy == ref.in_scope_accuracy
    assert r.ood.oos_recall == ref.oos_recall
    assert clf.ood.threshold == r.ood.threshold
    assert r.ood_threshold_before == clf.info["ood"]["valid"]["threshold"]
    # saved in place: ood.json gets the threshold, the arrays stay byte for byte
    save_calibration(clf, out)
    assert (out / OOD_ARRAYS).read_bytes() == arrays
    assert IntentClassifier.load(out).ood.threshold == r.ood.threshold
    # a fake classifier without a detector still recalibrates (no ood attribute at all)
    fake = SimpleNamespace(labels=NAMES, threshold=0.3, predict_proba=lambda t: np.full(
        (len(t), 3), 1 / 3))
    assert recalibrate(fake, *held).ood is None


def test_calibrate_command_rechooses_the_stored_detector(tmp_path, capsys):
    clf = tiny_classifier()
    fit_ood_detector(clf, TEXTS, LABELS, *VALID, "knn:2")
    out = clf.save(tmp_path / "m")
    held = _write(tmp_path / "held.csv", list(zip(QUERIES, ["card_lost", "transfer", "balance",
                                                            "oos", "oos", "card_lost"],
                                                  strict=True)))
    assert main(["calibrate", str(out), "--data", str(held)]) == 0
    text = capsys.readouterr().out
    assert "out-of-scope detector knn(k=2): score threshold" in text
    back = IntentClassifier.load(out)
    assert back.info["ood"]["valid"]["threshold"] == back.ood.threshold
    assert back.info["calibration"]["ood"]["threshold"] == back.ood.threshold


def test_the_recipe_fits_and_saves_the_detector(tmp_path):
    rows = list(zip(TEXTS, LABELS, strict=True)) * 4
    recipe = {"architecture": {"d_model": 32, "num_layers": 1, "num_heads": 4, "d_ff": 64,
                               "vocab_size": 200},
              "train": {"epochs": 2, "batch_size": 8, "lr": 3e-3, "progress": False}}
    valid = list(zip(*VALID, strict=True))
    run = train_intent_classifier(rows, valid, IntentRecipe.from_dict(
        {**recipe, "decision": {"ood_detector": "energy"}}),
                                  out_dir=tmp_path / "e")
    info = run.classifier.info["ood"]
    assert info["detector"] == "energy" and info["stored"] and info["fit_rows"] == len(rows)
    assert info["valid"]["n_oos"] == 3 and info["valid"]["method"] == "balanced"
    back = IntentClassifier.load(tmp_path / "e")
    assert isinstance(back.ood, EnergyDetector)
    lg = back.logits(QUERIES)
    want = logsumexp(lg, axis=1) < info["valid"]["threshold"]
    assert [a.out_of_scope for a in back.predict(QUERIES)] == want.tolist()
    # the default: max_prob, no detector files, info says so
    plain = train_intent_classifier(rows, valid, IntentRecipe.from_dict(recipe),
                                    out_dir=tmp_path / "p")
    assert plain.classifier.info["ood"]["detector"] == "max_prob"
    assert plain.classifier.info["ood"]["valid"] == plain.threshold.to_dict()
    assert not (tmp_path / "p" / OOD_FILE).exists()


def test_evaluation_counts_the_detectors_rejections():
    """``headwise eval`` scores what ``predict`` answers: with a detector, its decisions."""
    from headwise.intent.evaluation import evaluate

    clf = tiny_classifier()
    fit_ood_detector(clf, TEXTS, LABELS, *VALID, "knn:3")
    labels = ["card_lost", "transfer", "balance", "oos", "oos", "card_lost"]
    clf.ood.threshold = float(np.median(clf.ood.score(*clf.features_and_logits(QUERIES))))
    _, scores = clf.predict_proba_and_scores(QUERIES)
    reject = scores.rejected
    answers = clf.predict(QUERIES)
    assert [a.out_of_scope for a in answers] == reject.tolist()
    report = evaluate(clf, QUERIES, labels, slices=[("plain",)] * len(QUERIES))
    oos = np.array([y == "oos" for y in labels])
    assert report["oos_recall"] == pytest.approx(reject[oos].mean())
    assert report["reject_rate"] == pytest.approx(reject[~oos].mean())
    assert report["ood_detector"] == "knn"


# --- ood_detector="auto": the detector chosen on validation ---------------------------------
def test_select_detector_takes_the_best_validation_balance_ties_to_the_simplest():
    from headwise.intent.decision.ood import AUTO_CANDIDATES, balanced_mean, select_detector

    def c(acc, recall):
        return {"in_scope_accuracy": acc, "oos_recall": recall}

    assert balanced_mean(c(0.8, 0.6)) == pytest.approx(0.7)
    assert balanced_mean(c(0.8, None)) is None and balanced_mean(c(float("nan"), 0.5)) is None
    assert select_detector({"max_prob": c(0.8, 0.5), "knn:1": c(0.7, 0.7),
                            "energy": c(0.9, 0.4)}) == "knn:1"
    # a tie goes to the candidate listed first (the top probability: nothing to store)
    assert select_detector({"knn": c(0.8, 0.6), "max_prob": c(0.6, 0.8)}) == "max_prob"
    assert AUTO_CANDIDATES[0] == "max_prob"
    with pytest.raises(ValueError, match="out-of-scope validation rows"):
        select_detector({"max_prob": c(0.8, None)})
    with pytest.raises(ValueError):
        select_detector({})


@pytest.fixture
def few_oos(monkeypatch):
    """Let auto compare detectors on these tests' 3 out-of-scope validation rows."""
    from headwise.intent.decision.ood import selection

    monkeypatch.setattr(selection, "AUTO_MIN_OOS_ROWS", 1)


def _own_threshold(clf):
    """What calibrate_on_validation records before a detector is fitted (the reference:
    the top-probability rule on the validation rows, by hand)."""
    from headwise.intent.decision.oos import choose_threshold

    _, v_l = one_at_a_time(clf, VALID[0])
    gold = np.array([NAMES.index(y) if y in NAMES else -1 for y in VALID[1]])
    conf = softmax(v_l / clf.temperature, axis=1).max(1)
    clf.info["oos_threshold"] = choose_threshold(conf, v_l.argmax(1) == gold,
                                                 gold < 0).to_dict()
    return clf


def test_auto_keeps_the_candidate_best_on_validation(few_oos):
    from headwise.intent.decision.ood import AUTO_CANDIDATES, balanced_mean, describe_auto

    clf = _own_threshold(tiny_classifier())
    # the reference: each candidate fitted on its own (same model), its validation balance
    want = {"max_prob": balanced_mean(clf.info["oos_threshold"])}
    unfit = {}
    for spec in AUTO_CANDIDATES[1:]:
        try:
            want[spec] = balanced_mean(fit_ood_detector(clf, TEXTS, LABELS, *VALID, spec))
        except ValueError as e:  # a candidate these few rows cannot fit (k > rows)
            unfit[spec] = str(e)
    assert "knn:50" in unfit  # 15 training rows: auto must skip it, not fail
    fit_ood_detector(clf, TEXTS, LABELS, *VALID, "auto")
    info = clf.info["ood"]
    scores = info["auto"]["valid_mean"]
    assert list(scores) == [s for s in AUTO_CANDIDATES if s not in unfit]
    assert scores == pytest.approx(want)
    assert info["auto"]["skipped"] == unfit
    assert "knn:50 not fitted (k=50 needs at least 50 training rows" in describe_auto(info)
    best = max(want, key=lambda s: (round(want[s], 12), -AUTO_CANDIDATES.index(s)))
    assert info["auto"]["chosen"] == best
    if best == "max_prob":
        assert clf.ood is None and info["detector"] == "max_prob"
    else:
        assert clf.ood is not None and info["stored"]
        assert clf.ood.describe() == make_detector(best).describe()
        assert clf.ood.threshold == info["valid"]["threshold"]


def test_auto_picks_a_distance_detector_when_it_separates_better(monkeypatch, few_oos):
    """Validation rows where the top probability cannot tell the out-of-scope ones and
    the pooled vectors can: auto keeps a feature detector."""
    from headwise.intent.posthoc import recalibration

    clf = tiny_classifier()
    rng = np.random.default_rng(0)
    n_train, d = len(TEXTS), 8
    train_f = rng.normal(0, 0.1, (n_train, d)) + np.eye(d)[[NAMES.index(y) for y in LABELS]]
    vf = np.vstack([np.eye(d)[[NAMES.index(y) for y in VALID[1][:4]]],
                    rng.normal(0, 0.1, (3, d)) + 5.0])
    # logits: the right intent on top for the in-scope rows, equally sure everywhere
    lg = lambda ids: 4.0 * np.eye(len(NAMES))[ids]  # noqa: E731
    train_l = lg([NAMES.index(y) for y in LABELS])
    v_l = lg([NAMES.index(y) for y in VALID[1][:4]] + [0, 1, 2])

    def fake(texts, batch_size=64):
        return (train_f, train_l) if len(texts) == n_train else (vf, v_l)

    monkeypatch.setattr(clf, "features_and_logits", fake)
    conf = softmax(v_l / clf.temperature, axis=1).max(1)
    gold = np.array([NAMES.index(y) if y in NAMES else -1 for y in VALID[1]])
    from headwise.intent.decision.oos import choose_threshold

    clf.info["oos_threshold"] = choose_threshold(conf, v_l.argmax(1) == gold,
                                                 gold < 0).to_dict()
    choice = recalibration.fit_ood_detector(clf, TEXTS, LABELS, *VALID, "auto")
    info = clf.info["ood"]
    # the top probability is the same for every row: no threshold separates them
    assert info["auto"]["valid_mean"]["max_prob"] < 0.75
    assert info["auto"]["valid_mean"][info["auto"]["chosen"]] == 1.0
    assert info["auto"]["chosen"] in ("knn:1", "knn", "mahalanobis:ledoit_wolf")
    assert choice.oos_recall == 1.0 and choice.in_scope_accuracy == 1.0
    assert clf.ood is not None and info["stored"]


def test_auto_without_enough_out_of_scope_validation_keeps_max_prob():
    from headwise.intent.decision.ood import AUTO_MIN_OOS_ROWS

    assert AUTO_MIN_OOS_ROWS == 20
    for rows in (VALID, (VALID[0][:4], VALID[1][:4])):  # 3 out-of-scope rows, then none
        clf = _own_threshold(tiny_classifier())
        assert fit_ood_detector(clf, TEXTS, LABELS, *rows, "auto") is None
        assert clf.ood is None and clf.info["ood"]["detector"] == "max_prob"
        assert clf.info["ood"]["auto"] is None
        assert f"there were {3 if rows is VALID else 0} out-of-scope" in clf.info["ood"]["note"]
    with pytest.raises(ValueError, match="keeps the max_prob threshold"):
        fit_ood_detector(TfidfClassifier.fit(TEXTS, LABELS), TEXTS, LABELS, *VALID, "auto")


def test_the_recipe_takes_auto(tmp_path, few_oos):
    rows = list(zip(TEXTS, LABELS, strict=True)) * 4
    recipe = IntentRecipe.from_dict({
        "architecture": {"d_model": 32, "num_layers": 1, "num_heads": 4, "d_ff": 64,
                         "vocab_size": 200},
        "train": {"epochs": 1, "batch_size": 8, "lr": 3e-3, "progress": False},
        "decision": {"ood_detector": "auto"}})
    run = train_intent_classifier(rows, list(zip(*VALID, strict=True)), recipe,
                                  out_dir=tmp_path / "a")
    info = run.classifier.info["ood"]
    assert info["auto"]["chosen"] in info["auto"]["candidates"]
    back = IntentClassifier.load(tmp_path / "a")
    assert (back.ood is None) == (info["auto"]["chosen"] == "max_prob")
    assert (tmp_path / "a" / OOD_FILE).exists() == (back.ood is not None)
    # with a blend, auto is the default too (it applies when validation keeps the network
    # alone); a detector by name reads the network alone, so a blend refuses it
    assert IntentRecipe.from_dict({"levers": {"blend": "tfidf"}}).decision.ood_detector \
        == "auto"
    with pytest.raises(ValueError, match="ood_detector"):
        IntentRecipe.from_dict({
            "levers": {"blend": "tfidf"},
            "decision": {"ood_detector": "energy"}})


def test_training_with_enough_out_of_scope_rows_reports_what_auto_kept(tmp_path, capsys):
    """The default recipe with 24 out-of-scope validation rows: auto compares the detectors
    (no patched minimum), ``train`` prints each one's validation score and the kept
    detector's threshold, and the saved model answers with the kept score."""
    from headwise.intent.decision.ood import AUTO_CANDIDATES, AUTO_MIN_OOS_ROWS

    oos = [f"what is the weather in city number {i}" for i in range(12)] + \
          [f"play song {i} for me please" for i in range(12)]
    assert len(oos) >= AUTO_MIN_OOS_ROWS
    valid = _write(tmp_path / "valid.csv", [*zip(*VALID, strict=True), *((t, "oos") for t in oos)])
    train = _write(tmp_path / "train.csv", list(zip(TEXTS, LABELS, strict=True)) * 4)
    config = tmp_path / "recipe.json"
    config.write_text(json.dumps({
        "architecture": {"d_model": 32, "num_layers": 1, "num_heads": 4, "d_ff": 64,
                         "vocab_size": 200},
        "train": {"epochs": 2, "batch_size": 8, "lr": 3e-3, "progress": False}}),
        encoding="utf-8")
    out = tmp_path / "m"
    assert main(["train", "--data", str(train), "--valid", str(valid), "--model",
                 "transformer", "--config", str(config), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    info = IntentClassifier.load(out).info["ood"]
    auto = info["auto"]
    assert auto["oos_rows"] == len(oos) + 3 and auto["candidates"] == list(AUTO_CANDIDATES)
    assert f"kept {auto['chosen']}" in printed
    assert all(spec in printed for spec in AUTO_CANDIDATES)
    score = "top probability" if auto["chosen"] == "max_prob" else f"{info['detector']} detector"
    assert f"out-of-scope threshold on the {score}" in printed
    back = IntentClassifier.load(out)
    assert (back.ood is None) == (auto["chosen"] == "max_prob")


def test_auto_refuses_what_every_detector_refuses_and_the_recipe_names_auto():
    clf = _own_threshold(tiny_classifier())
    with pytest.raises(ValueError, match="does not know"):
        fit_ood_detector(clf, TEXTS, ["nonsense"] * len(TEXTS), *VALID, "auto")
    with pytest.raises(ValueError, match="different lengths"):
        fit_ood_detector(clf, TEXTS, LABELS[:-1], *VALID, "auto")
    with pytest.raises(ValueError, match="'auto'.*knn:K"):
        IntentRecipe.from_dict({"decision": {"ood_detector": "bogus"}})
    with pytest.raises(ValueError, match="knn:K"):
        make_detector("auto")  # a setting, not a detector
