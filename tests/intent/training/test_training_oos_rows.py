"""Out-of-scope rows in the training data (issue 37): never an intent, counted apart, and
used beside the validation rows to choose the out-of-scope threshold; a team's own
out-of-scope label (``decision.oos_labels``, ``headwise train --oos-labels``)."""

from __future__ import annotations

import csv
import json

from tiny_corpus import INTENTS

from headwise.cli import main
from headwise.intent.training.pipeline import train_intent_classifier
from headwise.intent.training.recipe import Decision, IntentRecipe, Tfidf, default_train
from headwise.text.labels import is_oos_label

IN_SCOPE = [(t, k) for k, ts in INTENTS.items() for t in ts] * 3
OTHER = ["what's the weather like", "tell me a joke", "who won the match",
         "recommend a film", "how tall is everest", "sing me a song"]


def _recipe(**decision) -> IntentRecipe:
    part = Tfidf(c=1.0)
    return IntentRecipe(architecture=part, train=default_train(part),
                        decision=Decision(**decision))


def test_a_teams_label_joins_the_default_out_of_scope_labels():
    assert is_oos_label("其他", ["其他"]) and is_oos_label(" Other ", ["其他"])
    assert is_oos_label("OOS") and not is_oos_label("其他") and not is_oos_label(None, ["x"])
    assert Decision(oos_labels="其他").oos_label_names == ["其他"]
    assert Decision(oos_labels=["其他", "无关"]).oos_label_names == ["其他", "无关"]


def test_training_oos_rows_are_no_intent_and_choose_the_threshold(tmp_path):
    train = IN_SCOPE + [(t, "其他") for t in OTHER[:4]] + [(t, "oos") for t in OTHER[4:]]
    valid = [(t, k) for k, ts in INTENTS.items() for t in ts[:3]]  # no out-of-scope row
    lines: list[str] = []
    result = train_intent_classifier(train, valid, _recipe(oos_labels="其他"),
                                     out_dir=tmp_path / "m", report=lines.append)
    clf = result.classifier
    assert sorted(clf.labels) == sorted(INTENTS)
    # a TF-IDF model has no outlier exposure: the default (None) leaves it at 0
    assert clf.info["train_oos"] == {"rows": 6, "labels": ["oos", "其他"], "used": True,
                                     "outlier_exposure": 0.0, "auto": True, "held_out": 0}
    # the threshold saw the six rows as out-of-scope validation rows
    assert result.threshold.n_oos == 6 and clf.info["valid_examples"] == len(valid) + 6
    assert lines == ["6 out-of-scope rows (label oos, 其他) used for the out-of-scope "
                     "threshold, beside the validation rows (not trained on); 3 intents"]
    # without the team's label, 其他 is an ordinary intent
    plain = train_intent_classifier(train, valid, _recipe(), out_dir=tmp_path / "p")
    assert "其他" in plain.classifier.labels and plain.threshold.n_oos == 2


def test_without_in_scope_validation_rows_they_are_left_out_and_said_so(tmp_path):
    train = IN_SCOPE + [(t, "oos") for t in OTHER]
    recipe = _recipe()
    recipe = IntentRecipe(architecture=recipe.architecture, train=recipe.train,
                          valid_fraction=0.0)
    lines: list[str] = []
    result = train_intent_classifier(train, None, recipe, out_dir=tmp_path / "m",
                                     report=lines.append)
    assert result.classifier.info["train_oos"] == {"rows": 6, "labels": ["oos"], "used": False,
                                                   "outlier_exposure": 0.0, "auto": True,
                                                   "held_out": 0}
    assert lines == ["6 out-of-scope rows (label oos) left out: no in-scope validation rows "
                     "to choose a threshold against; 3 intents"]
    # the held-out share of the training rows: they join it
    split = train_intent_classifier(train, None, _recipe(), out_dir=tmp_path / "s")
    assert split.classifier.info["train_oos"]["used"] and split.threshold.n_oos == 6


def test_headwise_train_counts_intents_without_the_oos_labels(tmp_path, capsys):
    data = tmp_path / "train.csv"
    with open(data, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        w.writerows(IN_SCOPE + [(t, "其他") for t in OTHER] + [("hello there", "oos")])
    out = tmp_path / "m"
    assert main(["train", "--data", str(data), "--model", "tfidf", "--oos-label", "其他",
                 "--out", str(out), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert f"training data: {len(IN_SCOPE) + 7} rows, 3 intents" in text
    assert "7 out-of-scope rows (label oos, 其他) used for the out-of-scope threshold, " in text
    summary = json.loads((out / "train_summary.json").read_text(encoding="utf-8"))
    assert summary["recipe"]["decision"]["oos_labels"] == "其他"
    assert summary["train_oos"]["rows"] == 7
    # eval and calibrate read the model's own out-of-scope label in their data too
    test = tmp_path / "test.csv"
    with open(test, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        w.writerows([(t, k) for k, ts in INTENTS.items() for t in ts[:2]]
                    + [(t, "其他") for t in OTHER[:3]] + [("good morning", "oos")])
    assert main(["eval", str(out), "--data", str(test), "--out", str(tmp_path / "ev"),
                 "--json"]) == 0
    report = json.loads((tmp_path / "ev" / "report.json").read_text(encoding="utf-8"))
    assert report["oos_examples"] == 4 and "其他" not in report["unseen_labels"]
    capsys.readouterr()
    assert main(["calibrate", str(out), "--data", str(test)]) == 0
    assert ": 6 in-scope rows, 4 out-of-scope" in capsys.readouterr().out


def test_a_networks_detector_is_chosen_on_them_too(tmp_path):
    recipe = IntentRecipe.from_dict({
        "architecture": {"d_model": 32, "num_layers": 1, "num_heads": 4, "d_ff": 64,
                         "vocab_size": 200},
        "train": {"epochs": 2, "batch_size": 8, "lr": 3e-3, "progress": False},
        "decision": {"ood_detector": "energy"}})
    valid = [(t, k) for k, ts in INTENTS.items() for t in ts[:3]]
    lines: list[str] = []
    run = train_intent_classifier(IN_SCOPE + [(t, "oos") for t in OTHER], valid, recipe,
                                  out_dir=tmp_path / "n", report=lines.append)
    info = run.classifier.info
    assert info["ood"]["detector"] == "energy" and info["ood"]["valid"]["n_oos"] == 6
    assert info["ood"]["fit_rows"] == len(IN_SCOPE)  # fitted on in-scope rows only
    assert "6 out-of-scope rows (label oos) used for the out-of-scope threshold and " \
           "detector, beside the validation rows (not trained on); 3 intents" in lines
