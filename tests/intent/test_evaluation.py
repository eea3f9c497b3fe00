"""The one evaluation (:func:`headwise.intent.evaluate`): a tiny trained Transformer scored
against values computed by hand from its own forward pass (one text at a time, numpy and
scikit-learn), long texts scored as ``predict`` answers them (in windows), annotated rows
read as sets of intents, and the calls it refuses. The compound model's reports:
tests/intent/test_compound.py."""

from __future__ import annotations

import csv
import json
from datetime import date

import numpy as np
import pytest
import torch
from sklearn.metrics import confusion_matrix, f1_score
from tiny_long_text import CHATTER, NAMES, REQUEST, planted, trained_on_chatter
from tiny_models import MAX_LENGTH

from headwise.intent import evaluate, format_report
from headwise.intent.classifier import IntentClassifier
from headwise.intent.inference import SingleLabelPredictor, TorchRuntime
from headwise.intent.inference.bucketing import window_length
from headwise.text.dataset import Example, SlotSpan

#: short rows (within the maximum length): the tiny corpus's requests, one mislabelled
#: (an error to list), chatter labelled out of scope, an intent the model does not know
ROWS = [("i lost my card", "card_lost"), ("my card was stolen", "card_lost"),
        ("send money to my friend", "transfer"), ("wire money to another bank", "transfer"),
        ("what is my balance", "balance"), ("check how much is left", "balance"),
        ("someone took my card", "transfer"),
        ("hello there", "oos"), ("ok sure", "oos"), ("thank you kindly", "oos"),
        ("open a new account", "open_account")]
TEXTS = [t for t, _ in ROWS]
LABELS = [y for _, y in ROWS]
#: the default windows' stride: half a window's body ([CLS] and [SEP] aside)
HALF_BODY = (window_length(None, MAX_LENGTH) - 2) // 2


@pytest.fixture(scope="module")
def trained() -> IntentClassifier:
    clf = trained_on_chatter()
    assert clf.predict([REQUEST])[0].intent == "card_lost"
    return clf


def by_hand(clf: IntentClassifier, texts: list[str]) -> np.ndarray:
    """Calibrated probabilities (n, intents), one text per forward pass, cut to the
    maximum length: the reference (no predictor, no batching)."""
    rows = []
    with torch.no_grad():
        for t in texts:
            enc = clf.tokenizer([t], max_length=clf.max_length)
            logits = clf.model(enc["input_ids"], enc["attention_mask"])["logits"]
            rows.append(torch.softmax(logits.double() / clf.temperature, -1)[0].numpy())
    return np.stack(rows)


def test_single_label_report_matches_the_hand_computed_scores(trained, tmp_path):
    assert max(trained.tokenizer.lengths(TEXTS)) <= MAX_LENGTH  # no long-text policy at work
    slices = [("plain",)] * 7 + [("chatter",)] * 3 + [None]
    report = evaluate(trained, TEXTS, LABELS, out_dir=tmp_path, slices=slices)

    probs = by_hand(trained, TEXTS)
    top, conf = probs.argmax(1), probs.max(1)
    reject = conf < trained.threshold
    assert np.all(np.abs(conf - trained.threshold) > 1e-4)  # no row on the edge
    known = np.array([y in NAMES for y in LABELS])
    oos = np.array([y == "oos" for y in LABELS])
    gold = np.array([NAMES.index(y) if y in NAMES else -1 for y in LABELS])
    right = top == gold
    assert report["scored_as"] == "single_label"
    assert report["num_rows"] == 11 and report["num_examples"] == 7
    assert report["accuracy"] == pytest.approx(right[known].mean())
    assert report["macro_f1"] == pytest.approx(f1_score(gold[known], top[known],
                                                        average="macro"))
    assert report["confusion_matrix"] == confusion_matrix(
        gold[known], top[known], labels=range(len(NAMES))).tolist()
    assert report["in_scope_accuracy_with_threshold"] == pytest.approx(
        (right & ~reject)[known].mean())
    assert report["reject_rate"] == pytest.approx(reject[known].mean())
    assert report["oos_examples"] == 3
    assert report["oos_recall"] == pytest.approx(reject[oos].mean())
    assert report["unseen_labels"] == {"open_account": 1}
    assert report["threshold"] == trained.threshold and report["ood_detector"] is None
    want_errors = [(TEXTS[i], LABELS[i], NAMES[top[i]]) for i in np.flatnonzero(known & ~right)]
    assert ("someone took my card", "transfer", "card_lost") in want_errors
    assert [(e["text"], e["gold"], e["predicted"]) for e in report["errors"]] == want_errors
    for e in report["errors"]:
        assert e["confidence"] == pytest.approx(conf[TEXTS.index(e["text"])], abs=1e-6)
    assert report["long_text"] == {"policy": "chunk_max", "window": window_length(None, MAX_LENGTH),
                                   "stride": HALF_BODY, "rows": 0}
    assert report["runtime"] == "torch"
    assert (tmp_path / "confusion.png").is_file()
    # per slice: "all", then the named ones; the unseen intent's row counts in "all" only
    rows = {r["slice"]: r for r in report["slices"]}
    assert [r["slice"] for r in report["slices"]][0] == "all"
    assert rows["chatter"]["n_oos"] == 3 and rows["chatter"]["oos_recall"] == pytest.approx(
        reject[7:10].mean())
    assert rows["plain"]["closed_accuracy"] == pytest.approx(right[:7].mean())
    json.dumps(report)  # JSON-serialisable, as report.json
    text = format_report(report)
    assert f"accuracy {report['accuracy']:.4f}" in text and "open_account (1)" in text
    assert "over the model's maximum length" not in text


def windowed_by_hand(clf: IntentClassifier, texts: list[str],
                     chunk_length: float | int | None = None) -> list[tuple[int, bool]]:
    """The chunk_max rule by hand: each text's windows (the predictor's encoding, windows
    ``chunk_length`` wide) read one at a time; among the windows the threshold keeps, the
    most confident answers, else the most confident (rejected). Each text's (top intent,
    rejected)."""
    windows = SingleLabelPredictor(clf, TorchRuntime(clf.model),
                                   chunk_length=chunk_length).encode(texts)
    out = []
    with torch.no_grad():
        for item in windows:
            assert len(item.chunks) > 1
            probs = np.stack([torch.softmax(clf.model(
                torch.tensor([c]), torch.ones(1, len(c), dtype=torch.long))["logits"].double()
                / clf.temperature, -1)[0].numpy() for c in item.chunks])
            top = probs.max(1)
            kept = top >= clf.threshold
            w = int(np.where(kept, top, -np.inf).argmax()) if kept.any() else int(top.argmax())
            out.append((int(probs[w].argmax()), not kept.any()))
    return out


def per_row(report: dict) -> list[tuple[bool, bool]]:
    """(top intent right, rejected) of each row, from the report's one-row slices."""
    rows = [r for r in report["slices"] if r["slice"] != "all"]
    return [(r["closed_accuracy"] == 1.0, r["in_scope_reject_rate"] == 1.0) for r in rows]


def test_a_long_text_is_scored_as_predict_answers_it(trained):
    """Past the maximum length, eval reads a text in windows, as predict does (the
    default policy), not cut at the first window as it did before."""
    texts = [planted(p, seed=s) for s in (0, 5) for p in ("start", "middle", "end")]
    labels = ["card_lost"] * len(texts)
    one_each = [(f"row{i}",) for i in range(len(texts))]
    assert min(trained.tokenizer.lengths(texts)) > MAX_LENGTH
    auto = evaluate(trained, texts, labels, slices=one_each)
    assert auto["long_text"] == {"policy": "chunk_max", "window": window_length(None, MAX_LENGTH),
                                 "stride": HALF_BODY, "rows": len(texts)}
    want = windowed_by_hand(trained, texts)
    assert per_row(auto) == [(top == 0, rejected) for top, rejected in want]
    answers = trained.predict(texts)  # the library's answers agree
    assert per_row(auto) == [(a.top_k[0][0] == "card_lost", a.out_of_scope) for a in answers]
    assert f"{len(texts)} rows over the model's maximum length, read by the chunk_max " \
        f"policy" in format_report(auto)
    # cut to the first window (eval's reading before): scored on the first window alone
    cut = evaluate(trained, texts, labels, long_text="truncate", slices=one_each)
    probs = by_hand(trained, texts)
    assert cut["long_text"] == {"policy": "truncate", "window": None, "stride": None,
                                "rows": len(texts)}
    assert per_row(cut) == [(p.argmax() == 0, p.max() < trained.threshold) for p in probs]
    # a predictor given whole: its runtime and policy
    predictor = SingleLabelPredictor(trained, TorchRuntime(trained.model), long_text="truncate")
    again = evaluate(predictor, texts, labels, slices=one_each)
    assert {k: again[k] for k in ("accuracy", "reject_rate", "errors", "slices")} == \
        {k: cut[k] for k in ("accuracy", "reject_rate", "errors", "slices")}
    with pytest.raises(ValueError, match="a predictor reads long texts in the windows"):
        evaluate(predictor, texts, labels, chunk_length=8)


def test_eval_reads_long_texts_in_windows_as_narrow_as_asked(trained, tmp_path, capsys):
    """``chunk_length`` (``--long-text POLICY:N``): the windows' width, as predict takes it;
    each row scored by the chunk_max rule on its 8-token windows, worked out by hand."""
    from headwise.cli import main

    texts = [planted(p, seed=s) for s in (0, 5) for p in ("start", "middle", "end")]
    labels = ["card_lost"] * len(texts)
    one_each = [(f"row{i}",) for i in range(len(texts))]
    narrow = evaluate(trained, texts, labels, chunk_length=8, slices=one_each)
    assert narrow["long_text"] == {"policy": "chunk_max", "window": 8, "stride": 3,
                                   "rows": len(texts)}
    want = windowed_by_hand(trained, texts, chunk_length=8)
    assert per_row(narrow) == [(top == 0, rejected) for top, rejected in want]
    assert "read by the chunk_max policy in windows of 8 tokens" in format_report(narrow)
    with pytest.raises(ValueError, match="the truncate policy does not cut"):
        evaluate(trained, texts, labels, long_text="truncate", chunk_length=8)
    model = trained.save(tmp_path / "model")
    data = tmp_path / "long.csv"
    with data.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        w.writerows(zip(texts, labels, strict=True))
    assert main(["eval", str(model), "--data", str(data), "--json", "--long-text",
                 "chunk_max:8"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["long_text"] == narrow["long_text"]
    assert report["accuracy"] == evaluate(trained, texts, labels, chunk_length=8)["accuracy"]


def test_annotated_rows_score_a_single_label_model_as_sets_of_intents(trained):
    """A single-label answer is a set of zero or one intent; a row of two intents can then
    be half right, never exactly; slots are not scored without a slot tagger."""
    amount = SlotSpan("amount_of_money", 9, 18, "50 pounds", {"amount": 50.0})
    rows = [Example("i lost my card", ("card_lost",), (), 1),
            Example("transfer 50 pounds to john", ("transfer",), (amount,), 2),
            Example("what is my balance", ("balance", "transfer"), (), 3),
            Example("hello there", (), (), 4),
            Example("ok sure", ("greeting",), (), 5)]
    texts = [e.text for e in rows]
    assert max(trained.tokenizer.lengths(texts)) <= MAX_LENGTH
    report = evaluate(trained, rows)
    probs = by_hand(trained, texts)
    pred = np.zeros((len(rows), len(NAMES)), dtype=bool)
    for i, p in enumerate(probs):
        pred[i, p.argmax()] = p.max() >= trained.threshold
    gold = np.array([[name in e.intents for name in NAMES] for e in rows])
    assert report["scored_as"] == "multi_label" and report["num_examples"] == 5
    m = report["intents"]
    assert m["micro_f1"] == pytest.approx(f1_score(gold, pred, average="micro",
                                                   zero_division=0))
    assert m["exact_match"] == pytest.approx(np.mean([(g == p).all()
                                                      for g, p in zip(gold, pred, strict=True)]))
    assert m["exact_match"] < 1.0  # the two-intent row
    assert report["unseen_intents"] == {"greeting": 1}
    assert "slots" not in report and "values" not in report
    text = format_report(report)
    assert "exact match" in text and "greeting (1)" in text
    # a gold row's out-of-scope label (a single-label file's, kept as written) is no intent
    marked = rows[:3] + [Example("hello there", ("oos",), (), 4)] + rows[4:]
    same = evaluate(trained, marked)
    assert same["intents"] == report["intents"] and "oos" not in same["unseen_intents"]


def test_what_evaluate_refuses(trained):
    rows = [Example("i lost my card", ("card_lost",), (), 1)]
    with pytest.raises(ValueError, match="give the gold labels"):
        evaluate(trained, TEXTS)
    with pytest.raises(ValueError, match="labels go with texts"):
        evaluate(trained, rows, ["card_lost"])
    with pytest.raises(ValueError, match="no rows"):
        evaluate(trained, [], [])
    with pytest.raises(ValueError, match="11 texts but 2 labels"):
        evaluate(trained, TEXTS, LABELS[:2])
    with pytest.raises(ValueError, match="a label on every row"):
        evaluate(trained, TEXTS[:2], ["card_lost", None])
    with pytest.raises(ValueError, match="2 slice lists for 1 rows"):
        evaluate(trained, rows, slices=[("plain",), ("typo",)])
    with pytest.raises(ValueError, match="only a compound"):
        evaluate(trained, rows, reference_date=date(2026, 1, 1))
    predictor = SingleLabelPredictor(trained, TorchRuntime(trained.model))
    with pytest.raises(ValueError, match="the policy it was built with"):
        evaluate(predictor, TEXTS, LABELS, long_text="truncate")
    with pytest.raises(ValueError, match="long_text"):
        evaluate(trained, TEXTS, LABELS, long_text="sideways")


def test_the_eval_command_reads_long_texts_as_predict_does(trained, tmp_path, capsys):
    from headwise.cli import main

    model = trained.save(tmp_path / "model")
    rows = [(planted("end"), "card_lost"), (REQUEST, "card_lost"), (CHATTER[0], "oos")]
    texts, labels = [t for t, _ in rows], [y for _, y in rows]
    data = tmp_path / "test.csv"
    with open(data, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        w.writerows(rows)
    assert main(["eval", str(model), "--data", str(data), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    library = evaluate(trained, texts, labels)
    assert report["long_text"] == {"policy": "chunk_max", "window": window_length(None, MAX_LENGTH),
                                   "stride": HALF_BODY, "rows": 1}
    for key in ("accuracy", "in_scope_accuracy_with_threshold", "oos_recall", "errors"):
        assert report[key] == library[key], key
    assert main(["eval", str(model), "--data", str(data), "--long-text", "truncate",
                 "--out", str(tmp_path / "cut")]) == 0
    out = capsys.readouterr().out
    assert "1 row over the model's maximum length, read by the truncate policy" in out
    saved = json.loads((tmp_path / "cut" / "report.json").read_text(encoding="utf-8"))
    cut = evaluate(trained, texts, labels, long_text="truncate")
    assert saved["long_text"] == {"policy": "truncate", "window": None, "stride": None,
                                  "rows": 1}
    for key in ("accuracy", "in_scope_accuracy_with_threshold", "oos_recall", "errors"):
        assert saved[key] == cut[key], key
