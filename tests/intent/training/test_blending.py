"""The TF-IDF blend (recipe field ``blend``): weighted ensembles, the share chosen on
validation data behind a paired bootstrap, and the training and CLI paths."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from answers import intent_of
from sklearn.metrics import f1_score

import headwise.intent.training.blending as blending
import headwise.intent.training.pipeline as pipeline_mod
from headwise.cli import main
from headwise.intent import IntentRecipe, train_intent_classifier
from headwise.intent.ensemble import ENSEMBLE_FILE, EnsembleClassifier
from headwise.intent.kinds import load_classifier
from headwise.intent.tfidf import TfidfClassifier
from headwise.intent.training.blending import (
    BLEND_WEIGHTS,
    _resampled_scores,
    choose_blend_weight,
    paired_bootstrap_p,
)

#: four intents, each told by its own keywords among shared filler words: TF-IDF reads
#: them at once, a one-epoch network at a tiny learning rate cannot
KEYWORDS = {"card_lost": ["lost", "stolen", "missing"], "transfer": ["send", "wire", "remit"],
            "balance": ["balance", "left", "funds"], "refund": ["refund", "return", "money back"]}
FILLER = ["please", "my", "account", "today", "help", "the", "now", "can", "you", "i", "want"]


def corpus(n_per_intent: int = 60, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    rows = []
    for intent, words in KEYWORDS.items():
        for _ in range(n_per_intent):
            text = rng.sample(FILLER, 4)
            text.insert(rng.randrange(5), rng.choice(words))
            rows.append((" ".join(text), intent))
    rng.shuffle(rows)
    return rows


#: a network that learns next to nothing: one epoch at lr 1e-6
WEAK = {"architecture": {"type": "transformer", "d_model": 16, "num_layers": 1,
                         "num_heads": 2, "d_ff": 32, "max_length": 16},
        "train": {"epochs": 1, "lr": 1e-6, "batch_size": 32, "progress": False},
        "valid_fraction": 0.3}
#: the same as a --config file (the command line gives the architecture and --quiet)
WEAK_FILE = {"architecture": {k: v for k, v in WEAK["architecture"].items() if k != "type"},
             "train": {k: v for k, v in WEAK["train"].items() if k != "progress"},
             "valid_fraction": 0.3}


def weak(**parts):
    """:data:`WEAK` with some parts (or ``valid_fraction``) given."""
    return IntentRecipe.from_dict({**WEAK, **parts})


@pytest.fixture(scope="module")
def tfidfs():
    rows = corpus()
    texts, labels = [t for t, _ in rows], [y for _, y in rows]
    return (TfidfClassifier.fit(texts, labels, c=1.0), TfidfClassifier.fit(texts[::3],
            labels[::3], c=0.05), texts)


# --- weighted ensembles ----------------------------------------------------------------
def test_weighted_ensemble_is_the_weighted_mean_and_survives_save(tfidfs, tmp_path):
    a, b, texts = tfidfs
    ens = EnsembleClassifier([a, b], weights=[0.3, 0.7])
    want = 0.3 * a.predict_proba(texts[:17]) + 0.7 * b.predict_proba(texts[:17])
    np.testing.assert_allclose(ens.predict_proba(texts[:17]), want, rtol=0, atol=1e-12)
    assert "weights=[0.3, 0.7]" in repr(ens)
    loaded = load_classifier(ens.save(tmp_path / "e"))
    np.testing.assert_array_equal(loaded.weights, [0.3, 0.7])
    np.testing.assert_allclose(loaded.predict_proba(texts[:17]), want, atol=1e-12)
    equal = EnsembleClassifier([a, b])
    np.testing.assert_allclose(equal.predict_proba(texts[:5]), 0.5 * (
        a.predict_proba(texts[:5]) + b.predict_proba(texts[:5])), atol=1e-12)


def test_version_1_files_load_with_equal_shares_and_newer_ones_are_refused(tfidfs, tmp_path):
    a, b, texts = tfidfs
    d = EnsembleClassifier([a, b], weights=[0.9, 0.1]).save(tmp_path / "e")
    meta = json.loads((d / ENSEMBLE_FILE).read_text())
    del meta["weights"]
    meta["version"] = 1
    (d / ENSEMBLE_FILE).write_text(json.dumps(meta))
    np.testing.assert_array_equal(load_classifier(d).weights, [0.5, 0.5])
    meta["version"] = 3
    (d / ENSEMBLE_FILE).write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="version 3, newer than this headwise reads"):
        load_classifier(d)


@pytest.mark.parametrize("weights", [[1.0], [0.5, 0.6], [-0.1, 1.1], [float("nan"), 1.0],
                                     [0.2, 0.3, 0.5]])
def test_bad_weights_are_refused(tfidfs, weights):
    a, b, _ = tfidfs
    with pytest.raises(ValueError, match="weights must"):
        EnsembleClassifier([a, b], weights=weights)


# --- the significance test against sklearn ------------------------------------------------
def test_resampled_scores_match_sklearn_on_every_resample():
    rng = np.random.default_rng(3)
    gold, pred = rng.integers(0, 6, 80), rng.integers(0, 6, 80)
    pred[:40] = gold[:40]
    picks = rng.integers(0, 80, (25, 80))
    macro = _resampled_scores(pred, gold, picks, "macro_f1", 6)
    acc = _resampled_scores(pred, gold, picks, "accuracy", 6)
    for b in range(25):
        g, p = gold[picks[b]], pred[picks[b]]
        assert macro[b] == pytest.approx(f1_score(g, p, average="macro", labels=np.unique(g),
                                                  zero_division=0), abs=1e-12)
        assert acc[b] == pytest.approx((g == p).mean(), abs=1e-12)


def test_bootstrap_p_is_small_for_a_clear_gain_and_large_for_none():
    rng = np.random.default_rng(0)
    gold = rng.integers(0, 5, 400)
    base = np.where(rng.random(400) < 0.6, gold, (gold + 1) % 5)
    better = np.where(rng.random(400) < 0.5, gold, base)  # fixes about half the errors
    for metric in ("accuracy", "macro_f1"):
        assert paired_bootstrap_p(base, better, gold, metric=metric) < 0.01
        assert paired_bootstrap_p(base, base, gold, metric=metric) == 1.0  # never better
        assert paired_bootstrap_p(better, base, gold, metric=metric) > 0.99
    one = base.copy()
    one[np.flatnonzero(base != gold)[0]] = gold[np.flatnonzero(base != gold)[0]]
    assert paired_bootstrap_p(base, one, gold) > 0.05  # one row of 400 is noise
    assert paired_bootstrap_p(base, one, gold, seed=1) == paired_bootstrap_p(base, one, gold,
                                                                             seed=1)
    with pytest.raises(ValueError, match="same n >= 1 rows"):
        paired_bootstrap_p(base[:3], base[:4], gold[:3])


def _probs(pred: np.ndarray, classes: int, confidence: float) -> np.ndarray:
    p = np.full((len(pred), classes), (1 - confidence) / (classes - 1))
    p[np.arange(len(pred)), pred] = confidence
    return p


def test_choose_blend_weight_by_hand():
    gold = np.array([0, 1, 2, 0, 1, 2] * 50)
    net_pred = gold.copy()
    net_pred[:150] = (gold[:150] + 1) % 3  # the network is wrong on the first half
    net = _probs(net_pred, 3, 0.5)  # unsure: p 0.5 on its answer, 0.25 on the others
    tf = _probs(gold, 3, 0.9)  # TF-IDF right everywhere and sure
    c = choose_blend_weight(net, tf, gold)
    # share w fixes a wrong row when (1-w)*0.25 + w*0.9 > (1-w)*0.5 + w*0.05: w > 0.227
    assert c.best_weight == 0.3 and c.weight == 0.3 and c.p_value < 0.01
    assert [w for w, _ in c.scores] == list(BLEND_WEIGHTS)
    assert c.network_score == 0.5 and c.blend_score == 1.0 and c.tfidf_score == 1.0
    assert "TF-IDF share 0.3 chosen on 300 validation rows" in c.describe()
    # the same models when the network is wrong on one row only: no significant gain
    net_pred = gold.copy()
    net_pred[0] = 1
    c = choose_blend_weight(_probs(net_pred, 3, 0.5), tf, gold)
    assert c.best_weight == 0.3 and c.weight == 0.0 and c.p_value > 0.05
    assert "not a significant gain" in c.describe() and "saved alone" in c.describe()
    assert choose_blend_weight(_probs(net_pred, 3, 0.5), tf, gold, alpha=1.0).weight == 0.3
    # a tie everywhere: the smallest share, no test to run
    c = choose_blend_weight(tf, tf, gold)
    assert c.best_weight == 0.0 and c.weight == 0.0 and c.p_value == 1.0
    assert "no share scored higher" in c.describe()
    with pytest.raises(ValueError, match="metric must be"):
        choose_blend_weight(tf, tf, gold, metric="f1")
    with pytest.raises(ValueError, match="shares must be in"):
        choose_blend_weight(tf, tf, gold, weights=[0.5, 1.5])
    with pytest.raises(ValueError, match="need equal"):
        choose_blend_weight(tf, tf[:-1], gold)


# --- training ------------------------------------------------------------------------------
def test_training_blends_a_weak_network_with_tfidf(tmp_path):
    rows = corpus()
    result = train_intent_classifier(rows, None, weak(levers={"blend": "tfidf"}),
                                     out_dir=tmp_path / "m")
    clf = result.classifier
    assert isinstance(clf, EnsembleClassifier)
    share = clf.info["blend"]["weight"]
    assert share > 0 and clf.info["blend"]["p_value"] < 0.05
    np.testing.assert_allclose(clf.weights, [1 - share, share])
    assert clf.info["members"] == ["transformer", "tfidf"]
    assert clf.info["valid"]["accuracy"] > clf.info["blend"]["scores"][0][1]
    loaded = load_classifier(tmp_path / "m")
    assert isinstance(loaded, EnsembleClassifier) and not (tmp_path / "m" / "checkpoints").exists()
    texts = [t for t, _ in rows[:20]]
    np.testing.assert_allclose(loaded.predict_proba(texts), clf.predict_proba(texts), atol=1e-6)
    assert loaded.threshold == clf.threshold == result.threshold.threshold


def test_training_keeps_the_network_alone_without_a_significant_gain(tmp_path, monkeypatch):
    monkeypatch.setattr(blending, "ALPHA", 0.0)  # no p-value is below 0
    result = train_intent_classifier(corpus(), None, weak(levers={"blend": "tfidf"}),
                                     out_dir=tmp_path / "m")
    clf = result.classifier
    assert not isinstance(clf, EnsembleClassifier)
    assert clf.info["blend"]["weight"] == 0.0 and clf.info["blend"]["best_weight"] > 0
    assert not (tmp_path / "m" / ENSEMBLE_FILE).exists()
    assert load_classifier(tmp_path / "m").labels == clf.labels


def test_blend_fields_reach_the_tfidf_fit(tmp_path, monkeypatch):
    seen = {}
    real = blending.fit_tfidf

    def spy(texts, labels, **kw):
        seen.update(kw, rows=len(texts))
        return real(texts, labels, **kw)

    monkeypatch.setattr(blending, "fit_tfidf", spy)
    recipe = weak(train={**WEAK["train"], "seed": 3},
                  levers={"blend": "tfidf", "blend_c": [0.5, 2.0],
                          "class_weighting": "balanced"},
                  decision={"prior_correction": 0.5})
    result = train_intent_classifier(corpus(), None, recipe, out_dir=tmp_path / "m")
    assert seen["c"] == [0.5, 2.0] and seen["prior_correction"] == 0.5
    assert seen["class_weight"] == "balanced" and seen["seed"] == 3
    assert seen["rows"] == result.classifier.info["train_examples"]


def test_blend_is_refused_where_it_cannot_work(tmp_path):
    with pytest.raises(ValueError, match=r"^levers\.blend does not apply to the tfidf "
                                         r"architecture"):
        IntentRecipe.from_dict({"architecture": {"type": "tfidf"}, "levers": {"blend": "tfidf"}})
    with pytest.raises(ValueError, match=r"levers\.blend must be one of \['none', 'tfidf'\]"):
        IntentRecipe.from_dict({"levers": {"blend": "svm"}})
    with pytest.raises(ValueError, match="decision.ood_detector 'energy' scores the network "
                                         "alone"):
        IntentRecipe.from_dict({
            "levers": {"blend": "tfidf"},
            "decision": {"ood_detector": "energy"}})
    with pytest.raises(ValueError, match=r"^levers\.blend_c is used only with levers\.blend"):
        IntentRecipe.from_dict({"levers": {"blend_c": 3.0}})
    with pytest.raises(ValueError, match="chooses the TF-IDF share on validation data"):
        train_intent_classifier(corpus(), None,
                                weak(valid_fraction=0.0, levers={"blend": "tfidf"}),
                                out_dir=tmp_path / "m")
    assert not (tmp_path / "m").exists()
    with pytest.raises(ValueError, match="remove levers.distill, levers.gce_q and levers.blend"):
        pipeline_mod._student_intents(IntentRecipe.from_dict({"levers": {"blend": "tfidf"}}),
                                      None, ["a", "b"])


# --- the command line -----------------------------------------------------------------------
def _csv(path, rows):
    path.write_text("text,label\n" + "".join(f"{t},{y}\n" for t, y in rows), encoding="utf-8")
    return path


def test_cli_blend_then_predict_and_eval(tmp_path, capsys):
    rows = corpus()
    data = _csv(tmp_path / "train.csv", rows)
    test = _csv(tmp_path / "test.csv", corpus(10, seed=1))
    cfg = tmp_path / "r.json"
    cfg.write_text(json.dumps(WEAK_FILE))
    assert main(["train", "--data", str(data), "--model", "transformer", "--config", str(cfg),
                 "--set", "levers.blend=tfidf", "--out", str(tmp_path / "m"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "blend: TF-IDF share" in out and "the members' temperatures" in out
    summary = json.loads((tmp_path / "m" / "train_summary.json").read_text())
    assert summary["blend"]["weight"] > 0
    assert main(["predict", str(tmp_path / "m"), "--json", "i lost my card please"]) == 0
    answer = json.loads(capsys.readouterr().out.splitlines()[0])
    assert intent_of(answer) == "card_lost"
    assert main(["eval", str(tmp_path / "m"), "--data", str(test), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["accuracy"] > 0.9


def test_cli_default_model_adds_the_blend_where_validation_allows(tmp_path, capsys,
                                                                  monkeypatch):
    from headwise.intent.training import builders

    monkeypatch.setattr(builders, "default_model",
                        lambda texts: ("transformer", "no --model given: test network"))
    data = _csv(tmp_path / "train.csv", corpus())
    cfg = tmp_path / "r.json"
    cfg.write_text(json.dumps(WEAK_FILE))
    assert main(["train", "--data", str(data), "--config", str(cfg), "--out",
                 str(tmp_path / "m"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "no --model given: test network; a TF-IDF model is fitted beside it" in out
    assert json.loads((tmp_path / "m" / "train_summary.json").read_text())[
        "recipe"]["levers"]["blend"] == "tfidf"
    # blend none, and --no-valid (nothing to choose the share on): the network alone
    for extra in (["--set", "levers.blend=none"], ["--no-valid"]):
        cfg.write_text(json.dumps({k: v for k, v in WEAK_FILE.items()
                                   if k != "valid_fraction"}))
        assert main(["train", "--data", str(data), "--config", str(cfg), "--out",
                     str(tmp_path / "n"), "--quiet", "--overwrite", *extra]) == 0
        out = capsys.readouterr().out
        assert "fitted beside it" not in out and "blend:" not in out
        assert json.loads((tmp_path / "n" / "train_summary.json").read_text())[
            "recipe"]["levers"]["blend"] == "none"
