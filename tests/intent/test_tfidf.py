"""TfidfClassifier against scikit-learn's own pipeline; the tfidf recipe architecture; mixed
ensembles and the `headwise ensemble` command."""

from __future__ import annotations

import json

import numpy as np
import pytest
from answers import intent_of
from tiny_corpus import INTENTS as EN

from headwise.cli import main
from headwise.intent import IntentRecipe, train_intent_classifier
from headwise.intent.decision.temperature import calibrated_probs
from headwise.intent.ensemble import EnsembleClassifier
from headwise.intent.kinds import load_classifier
from headwise.intent.tfidf import TFIDF_FILE, TfidfClassifier
from headwise.intent.training.cleaning import tfidf_features

ZH = {
    "退款": ["我要退款", "怎么申请退款", "退款什么时候到账", "钱退回来了吗", "帮我退一下款"],
    "地址": ["我想改地址", "收货地址写错了", "地址不用改了", "换个收件地址", "地址是对的"],
    "优惠": ["有优惠券吗", "满减活动还有吗", "怎么领券", "双十二有活动吗", "能便宜点吗"],
}


def _rows(corpus):
    return [(t, k) for k, ts in corpus.items() for t in ts]


@pytest.mark.parametrize("corpus,chinese", [(EN, False), (ZH, True)])
def test_matches_scikit_learn(corpus, chinese, tmp_path):
    texts, labels = zip(*_rows(corpus), strict=True)
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    ref = make_pipeline(tfidf_features(chinese), LogisticRegression(C=10.0, max_iter=2000))
    ref.fit(list(texts), list(labels))
    clf = TfidfClassifier.fit(texts, labels, c=10.0)
    assert clf.info["chinese"] is chinese and clf.labels == list(ref.classes_)
    probe = ["my card is gone", "退款到账了吗", "send 20 to mum", "地址错了"]
    np.testing.assert_allclose(clf.logits(probe), ref.decision_function(probe), atol=1e-9)
    np.testing.assert_allclose(clf.predict_proba(probe), ref.predict_proba(probe), atol=1e-9)
    # save/load: plain JSON + safetensors, same logits
    clf.temperature, clf.threshold = 0.7, 0.3
    back = TfidfClassifier.load(clf.save(tmp_path / "m"))
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == [TFIDF_FILE,
                                                                  "tfidf.safetensors"]
    np.testing.assert_allclose(back.logits(probe), clf.logits(probe), atol=1e-12)
    assert back.temperature == 0.7 and back.threshold == 0.3
    np.testing.assert_allclose(back.predict_proba(probe),
                               calibrated_probs(clf.logits(probe), 0.7), atol=1e-12)
    answers = back.predict(probe, top_k=2, threshold=0.0)
    assert [a.intent for a in answers] == [clf.labels[j] for j in clf.logits(probe).argmax(1)]
    # fitted or loaded (safetensors hands back C order), the product's dense operand is
    # C-contiguous: scipy would copy the whole matrix on every query otherwise
    for model in (clf, back):
        assert model.coef.T.flags.c_contiguous
    np.testing.assert_array_equal(back.coef, clf.coef)


def test_two_intents_match_scikit_learns_binary_model():
    # scikit-learn fits one weight row for two classes; the classifier keeps two logits
    # whose softmax is the binary model's sigmoid
    rows = [(t, k) for k, ts in EN.items() for t in ts if k != "balance"]
    texts, labels = [t for t, _ in rows], [y for _, y in rows]
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    ref = make_pipeline(tfidf_features(False), LogisticRegression(C=10.0, max_iter=2000))
    ref.fit(texts, labels)
    clf = TfidfClassifier.fit(texts, labels, c=10.0)
    probe = ["my card is gone", "send 20 to mum", "what"]
    z = clf.logits(probe)
    assert z.shape == (3, 2) and clf.labels == list(ref.classes_)
    np.testing.assert_allclose(z[:, 1] - z[:, 0], ref.decision_function(probe), atol=1e-9)
    np.testing.assert_allclose(clf.predict_proba(probe), ref.predict_proba(probe), atol=1e-9)


def test_errors(tmp_path):
    texts, labels = zip(*_rows(EN), strict=True)
    with pytest.raises(ValueError, match="two intents"):
        TfidfClassifier.fit(["a b", "c d"], ["x", "x"])
    with pytest.raises(ValueError, match="labels"):
        TfidfClassifier.fit(texts, labels[:-1])
    clf = TfidfClassifier.fit(texts, labels)
    with pytest.raises(ValueError):
        clf.predict([""])
    with pytest.raises(ValueError, match="do not fit"):
        TfidfClassifier(clf.vectorizers, clf.coef[:, :-1], clf.intercept, clf.labels)
    with pytest.raises(FileNotFoundError, match=TFIDF_FILE):
        TfidfClassifier.load(tmp_path)
    d = clf.save(tmp_path / "m")
    from headwise.intent import IntentClassifier

    with pytest.raises(FileNotFoundError, match="holds a TF-IDF classifier"):
        IntentClassifier.load(d)  # what `headwise serve` and `export` load
    (d / "tfidf.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="safetensors"):
        TfidfClassifier.load(d)
    (d / TFIDF_FILE).write_text("{not json")
    with pytest.raises(ValueError, match="not a valid"):
        TfidfClassifier.load(d)
    with pytest.raises(ValueError, match="linear_probe"):
        IntentRecipe.from_dict({
            "architecture": {"type": "tfidf"},
            "levers": {"linear_probe": True}})
    with pytest.raises(ValueError, match="task multi_label needs a Transformer, a BiLSTM or "
                                         "a pretrained encoder: .* no tfidf form"):
        IntentRecipe.from_dict({"architecture": {"type": "tfidf"},
                                "task": {"type": "multi_label"}})


def test_the_tfidf_architecture_calibrates_and_ensembles_with_a_network(tmp_path):
    rows = _rows(EN) * 2
    recipe = IntentRecipe.from_dict({
        "architecture": {"type": "tfidf", "c": 5.0},
        "train": {"progress": False}})
    run = train_intent_classifier(rows, _rows(EN), recipe, out_dir=tmp_path / "tfidf")
    tfidf = run.classifier
    assert isinstance(tfidf, TfidfClassifier) and tfidf.info["c"] == 5.0
    assert tfidf.info["recipe"]["architecture"] == {"type": "tfidf", "c": 5.0}
    assert run.valid_metrics["accuracy"] == 1.0
    assert isinstance(load_classifier(tmp_path / "tfidf"), TfidfClassifier)
    net = train_intent_classifier(rows, _rows(EN), IntentRecipe.from_dict({
        "architecture": {"d_model": 32, "num_layers": 1, "num_heads": 4, "vocab_size": 100},
        "train": {"epochs": 2, "batch_size": 8, "progress": False}}),
        out_dir=tmp_path / "net").classifier
    ens = EnsembleClassifier([tfidf, net])
    probe = ["my card is gone", "send 20 to mum", "how much is left"]
    want = (tfidf.predict_proba(probe) + net.predict_proba(probe)) / 2
    np.testing.assert_allclose(ens.predict_proba(probe), want, atol=1e-12)
    back = load_classifier(ens.save(tmp_path / "ens"))
    assert isinstance(back.members[0], TfidfClassifier)
    np.testing.assert_allclose(back.predict_proba(probe), want, atol=1e-6)


def test_train_tfidf_and_ensemble_commands(tmp_path, capsys):
    data = tmp_path / "train.csv"
    data.write_text("text,label\n" + "".join(f"{t},{k}\n" for t, k in _rows(EN) * 3))
    cfg = tmp_path / "net.json"
    cfg.write_text(json.dumps({"architecture": {"type": "transformer", "d_model": 32,
                                                "num_layers": 1, "num_heads": 4,
                                                "vocab_size": 100},
                               "train": {"epochs": 2, "batch_size": 8}}))
    assert main(["train", "--data", str(data), "--model", "tfidf", "--out",
                 str(tmp_path / "t"), "--quiet"]) == 0
    assert main(["train", "--data", str(data), "--config", str(cfg), "--out",
                 str(tmp_path / "n"), "--quiet"]) == 0
    capsys.readouterr()
    out = tmp_path / "ens"
    assert main(["ensemble", str(out), str(tmp_path / "t"), str(tmp_path / "n"),
                 "--data", str(data), "--json"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert set(scores) == {str(tmp_path / "t"), str(tmp_path / "n"), "ensemble"}
    assert main(["predict", str(out), "i lost my card", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out.splitlines()[0])
    assert intent_of(answer) == "card_lost"
    assert main(["eval", str(tmp_path / "t"), "--data", str(data)]) == 0
    capsys.readouterr()
    assert main(["ensemble", str(tmp_path / "e2"), str(out), str(tmp_path / "t")]) == 1
    assert "itself an ensemble" in capsys.readouterr().err
