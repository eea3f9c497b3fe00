"""A compound model blended with a one-vs-rest TF-IDF model (``levers.blend="tfidf"``): the
TF-IDF part is scikit-learn's, the share is chosen on validation rows by exact match (by
hand), the predictor mixes each intent's sigmoid as the hand-computed mix, the thresholds
are tuned again on the blended probabilities, the blend survives a save and load, answers
alike on PyTorch and onnxruntime, and share 0 keeps the network alone."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.multiclass import OneVsRestClassifier
from sklearn.pipeline import make_pipeline, make_union

from headwise.intent.compound.classifier import BLEND_TFIDF, CompoundClassifier
from headwise.intent.compound.thresholds import tune_thresholds
from headwise.intent.inference import CompoundPredictor, TorchRuntime
from headwise.intent.inference.load import export_checked_onnx
from headwise.intent.tfidf import TfidfOneVsRest
from headwise.intent.training.blending import blend_compound, choose_compound_blend
from headwise.intent.training.compound import compound_targets
from headwise.intent.training.pipeline import train_intent_classifier
from headwise.intent.training.recipe import IntentRecipe

#: a compound Transformer trained for one epoch only: its intents are far from learned, so
#: the TF-IDF model fitted on the same rows is the better one on them
WEAK = {
    "architecture": {"type": "transformer", "tokenizer": "wordpiece", "vocab_size": 120,
                     "max_length": 24, "d_model": 32, "num_layers": 1, "num_heads": 4,
                     "d_ff": 64, "dropout": 0.0, "attention_dropout": 0.0},
    "train": {"epochs": 1, "batch_size": 8, "lr": 3e-3, "patience": None, "progress": False},
    "levers": {"blend": "tfidf"},
    "task": {"type": "multi_label"}}
QUERIES = ["refund the 65 pounds please", "i was charged twice for 20 pounds refund it",
           "send 75 pounds to my sister", "what is the weather", "hello"]


def _network_probs(clf: CompoundClassifier, texts: list[str]) -> np.ndarray:
    """The network's sigmoids, by a plain forward pass of each text alone."""
    out = []
    with torch.no_grad():
        for text in texts:
            enc = clf.tokenizer([text], max_length=clf.max_length)
            logits = clf.model(**enc)["logits"][0].double()
            out.append(torch.sigmoid(logits).numpy())
    return np.stack(out)


@pytest.fixture(scope="module")
def blended(tmp_path_factory, compound_corpus):
    out = tmp_path_factory.mktemp("compound-blend") / "model"
    lines: list[str] = []
    trained = train_intent_classifier(compound_corpus, compound_corpus,
                                      IntentRecipe.from_dict(WEAK), out_dir=out,
                                      report=lines.append)
    return trained, out, lines


def test_the_one_vs_rest_model_is_scikit_learns(tmp_path):
    texts = ["refund my card", "card lost", "transfer money", "money refund please",
             "lost transfer", "hello there", "card and money", "refund transfer"]
    names = ["card", "money", "refund", "transfer", "never"]
    y = np.array([[n in t for n in names] for t in texts])
    model = TfidfOneVsRest.fit(texts, y, names, c=10.0, chinese=False)
    reference = make_pipeline(
        make_union(TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True),
                   TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True)),
        OneVsRestClassifier(LogisticRegression(C=10.0, max_iter=2000)))
    reference.fit(texts, y[:, :4].astype(int))  # "never" has no positive: nothing to fit
    queries = ["my card refund", "send money", "??"]
    got = model.probabilities(queries)
    np.testing.assert_allclose(got[:, :4], reference.predict_proba(queries), atol=1e-12)
    assert (got[:, 4] < 1e-12).all()
    model.save(tmp_path, "ovr")
    back = TfidfOneVsRest.load(tmp_path, "ovr")
    np.testing.assert_array_equal(back.probabilities(queries), got)
    assert back.intents == names and back.info == model.info
    (tmp_path / "ovr.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="ovr.safetensors"):
        TfidfOneVsRest.load(tmp_path, "ovr")
    with pytest.raises(ValueError, match=r"targets must be \(8, 5\)"):
        TfidfOneVsRest.fit(texts, y[:3], names)


def test_the_share_is_chosen_by_exact_match_by_hand():
    """One intent over four rows (gold 1, 1, 0, 0) and one that both models get right.
    The network's (0.6, 0.3, 0.4, 0.1) cannot be split by any threshold: its best F1
    (answer rows 0-2) leaves row 2 wrong, exact match 3/4. At share 0.1 row 1 (0.35) is
    still below row 2 (0.38); from 0.2 on (0.40 against 0.36) a threshold splits them:
    exact match 1. The smallest such share, 0.2, is the best; kept at alpha 1, and not at
    the default alpha, since one row of four is no significant gain."""
    gold = np.array([[1, 1], [1, 0], [0, 0], [0, 1]], dtype=bool)
    network = np.array([[0.6, 0.9], [0.3, 0.1], [0.4, 0.2], [0.1, 0.8]])
    tfidf = np.array([[0.9, 0.7], [0.8, 0.2], [0.2, 0.1], [0.1, 0.9]])
    choice = choose_compound_blend(network, tfidf, gold, alpha=1.0)
    scores = dict((w, s) for w, s in choice.scores)
    assert scores[0.0] == scores[0.1] == 0.75
    assert all(scores[w] == 1.0 for w in scores if w >= 0.2)
    assert choice.weight == choice.best_weight == 0.2 and choice.metric == "exact_match"
    assert choice.tfidf_score == 1.0 and choice.rows == 4
    strict = choose_compound_blend(network, tfidf, gold)
    assert strict.best_weight == 0.2 and strict.weight == 0.0 and strict.p_value >= 0.05
    assert "exact match" in strict.describe() and "not a significant gain" in strict.describe()
    with pytest.raises(ValueError, match="equal"):
        choose_compound_blend(network, tfidf[:3], gold)


def test_the_blend_is_chosen_on_validation_and_mixes_each_sigmoid(blended, compound_corpus):
    trained, _, lines = blended
    clf = trained.classifier
    info = clf.info["blend"]
    assert clf.tfidf is not None and 0.0 < clf.tfidf_share == info["weight"] < 1.0
    assert info["metric"] == "exact_match" and info["p_value"] < info["alpha"]
    assert info["rows"] == len(compound_corpus)
    scores = dict((w, s) for w, s in info["scores"])
    assert scores[info["weight"]] > scores[0.0]  # the blend beat the network alone
    assert any(line.startswith("blend: TF-IDF share") for line in lines)
    # the predictor's probabilities are the hand-computed mix of the two sigmoids
    texts = QUERIES + [e.text for e in compound_corpus[:6]]
    w = clf.tfidf_share
    expected = (1 - w) * _network_probs(clf, texts) + w * clf.tfidf.probabilities(texts)
    probs, _ = clf.analyse(texts)
    np.testing.assert_allclose(probs, expected, atol=1e-6, rtol=0)
    answer = clf.predict(QUERIES[0], top_k=len(clf.intents))[0]
    got = dict(answer.top_k)
    np.testing.assert_allclose([got[n] for n in clf.intents], expected[0], atol=1e-6)
    # the thresholds are tuned on the blended validation probabilities; the validation
    # metrics are the blend's, the network's kept beside them
    v_texts = [e.text for e in compound_corpus]
    gold = compound_targets(compound_corpus, clf.intents)
    assert clf.thresholds == tune_thresholds(clf.analyse(v_texts)[0], gold)
    assert trained.valid_metrics["exact_match"] == pytest.approx(scores[info["weight"]])
    assert info["network_valid"]["exact_match"] == pytest.approx(scores[0.0])


def test_the_blend_survives_save_and_load(blended):
    trained, out, _ = blended
    meta = json.loads((out / "compound.json").read_text())
    assert meta["blend"] == {"tfidf_share": trained.classifier.tfidf_share, "tfidf": BLEND_TFIDF}
    assert (out / f"{BLEND_TFIDF}.json").is_file()
    assert (out / f"{BLEND_TFIDF}.safetensors").is_file()
    back = CompoundClassifier.load(out)
    assert back.tfidf_share == trained.classifier.tfidf_share
    assert back.thresholds == trained.classifier.thresholds
    assert "TF-IDF share" in repr(back)
    a, _ = trained.classifier.analyse(QUERIES)
    b, _ = back.analyse(QUERIES)
    np.testing.assert_allclose(a, b, atol=1e-7, rtol=0)
    assert [p.to_dict() for p in back.predict(QUERIES)] == [
        p.to_dict() for p in trained.classifier.predict(QUERIES)]


def test_torch_and_onnx_predictors_agree_on_the_blend(blended, tmp_path, compound_corpus):
    trained, out, _ = blended
    clf = CompoundClassifier.load(out)
    onnx, _ = export_checked_onnx(clf, tmp_path / "model.onnx", model_dir=out)
    texts = QUERIES + [e.text for e in compound_corpus]
    on_torch = CompoundPredictor(clf, TorchRuntime(clf.model)).predict(texts, top_k=3)
    on_onnx = CompoundPredictor(clf, onnx).predict(texts, top_k=3)
    for a, b in zip(on_onnx, on_torch, strict=True):
        assert [i["intent"] for i in a["intents"]] == [i["intent"] for i in b["intents"]]
        np.testing.assert_allclose([i["confidence"] for i in a["top_k"]],
                                   [i["confidence"] for i in b["top_k"]], atol=1e-5, rtol=0)
        assert a["slots"] == b["slots"] and a["out_of_scope"] == b["out_of_scope"]
    # the onnx predictor mixes in the TF-IDF part too: its probabilities are not the network's
    predictor = CompoundPredictor(clf, onnx)
    rows = predictor.run(predictor.encode_truncated(QUERIES))
    network = 1 / (1 + np.exp(-np.stack([r.logits for r in rows])))
    w = clf.tfidf_share
    np.testing.assert_allclose(predictor.probabilities(QUERIES, rows),
                               (1 - w) * network + w * clf.tfidf.probabilities(QUERIES),
                               atol=1e-12)


def test_share_zero_keeps_the_network_alone(trained_compound_dir, compound_corpus, tmp_path):
    """On rows a learned network already answers, no share beats it significantly: the
    classifier is left as it was, and saved without a TF-IDF part."""
    clf = CompoundClassifier.load(trained_compound_dir)
    texts = [e.text for e in compound_corpus]
    before, _ = clf.analyse(texts)
    recipe = IntentRecipe.from_dict(WEAK)
    gold = compound_targets(compound_corpus, clf.intents)
    choice, tfidf, _ = blend_compound(clf, texts, gold, texts, gold, recipe)
    assert choice.weight == 0.0 and tfidf.intents == clf.intents
    assert clf.tfidf is None and clf.tfidf_share == 0.0
    np.testing.assert_array_equal(clf.analyse(texts)[0], before)
    assert "the network is saved alone" in choice.describe()
    (tmp_path / f"{BLEND_TFIDF}.json").write_text("{}")  # a stale blend is removed on save
    clf.save(tmp_path)
    assert not (tmp_path / f"{BLEND_TFIDF}.json").exists()
    assert json.loads((tmp_path / "compound.json").read_text())["blend"] is None
    assert CompoundClassifier.load(tmp_path).tfidf is None


def test_the_recipe_takes_the_blend_for_the_multi_label_task():
    recipe = IntentRecipe.from_dict(WEAK)
    assert recipe.multi_label and recipe.levers.blend == "tfidf"
    with pytest.raises(ValueError, match=r"^levers\.blend_c: the multi_label task's blend fits "
                                         r"one C"):
        IntentRecipe.from_dict({**WEAK, "levers": {"blend": "tfidf", "blend_c": [1.0, 10.0]}})
    with pytest.raises(ValueError, match=r"^decision\.reject_budget does not apply to the "
                                         r"multi_label task: a compound model answers "
                                         r"out-of-scope when no intent reaches"):
        IntentRecipe.from_dict({**WEAK, "decision": {"reject_budget": 0.1}})


def test_the_slots_stay_the_networks(trained_compound_dir, compound_corpus):
    network = CompoundClassifier.load(trained_compound_dir)
    texts = [e.text for e in compound_corpus]
    tfidf = TfidfOneVsRest.fit(texts, compound_targets(compound_corpus, network.intents),
                               network.intents)
    blend = CompoundClassifier(network.model, network.tokenizer, network.intents,
                               thresholds=network.thresholds, max_length=network.max_length,
                               tfidf=tfidf, tfidf_share=0.5)
    queries = QUERIES + texts[:8]
    found = [p.slots for p in blend.predict(queries)]
    assert found == [p.slots for p in network.predict(queries)]
    assert sum(bool(s) for s in found) >= 5
    assert not np.allclose(blend.analyse(queries)[0], network.analyse(queries)[0])


def test_a_share_needs_its_tfidf_model(trained_compound_dir):
    clf = CompoundClassifier.load(trained_compound_dir)
    with pytest.raises(ValueError, match=r"a TF-IDF share must be in \(0, 1\)"):
        CompoundClassifier(clf.model, clf.tokenizer, clf.intents, tfidf_share=0.3)


def test_a_blend_needs_validation_rows(tmp_path, compound_corpus):
    recipe = IntentRecipe.from_dict({**WEAK, "valid_fraction": 0.0})
    with pytest.raises(ValueError, match="chooses the TF-IDF share on validation data"):
        train_intent_classifier(compound_corpus, None, recipe, out_dir=tmp_path / "m")


def test_explain_says_the_tfidf_share_it_does_not_cover(blended, trained_compound_dir):
    from headwise.commands import explain as explain_command

    trained, out, _ = blended
    share = trained.classifier.tfidf_share
    assert 0.0 < share < 1.0
    record = explain_command.result(str(out), QUERIES[0])
    assert record["tfidf_share"] == share
    assert any("blends a TF-IDF model" in line for line in explain_command.render(record))
    plain = explain_command.result(str(trained_compound_dir), QUERIES[0])
    assert plain["tfidf_share"] == 0.0
    assert not any("TF-IDF" in line for line in explain_command.render(plain))
