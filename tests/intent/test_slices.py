"""Accuracy per slice: slice_report against hand-computed values, the readers' slices
column/field, ``headwise eval`` on sliced data, bad cases linked to their slices."""

from __future__ import annotations

import csv
import json

import pytest

from headwise.cli import main
from headwise.inspect import link_slices
from headwise.intent.evaluation import SliceRow, format_slice_table, slice_report
from headwise.intent.training.pipeline import train_intent_classifier
from headwise.intent.training.recipe import IntentRecipe
from headwise.text.dataset import Example
from headwise.text.readers import DataError, read_examples

GOLD = ["a", "a", "b", "oos", "oos", "b"]
ANSWERS = ["a", None, "a", "oos", "b", "b"]  # None and "oos": rejected
CLOSED = ["a", "a", "a", "a", "b", "b"]  # the top intent with the threshold off
SLICES = [("typo",), ("typo", "negation_scope"), ("plain",), ("oos_near_miss",),
          ("oos_near_miss", "typo"), None]


def test_slice_report_by_hand():
    rows = slice_report(GOLD, ANSWERS, SLICES, closed=CLOSED, order=["plain", "typo"])
    assert [r.slice for r in rows] == ["all", "plain", "typo", "negation_scope",
                                       "oos_near_miss"]
    by = {r.slice: r for r in rows}
    # all: right are rows 0 (a), 3 (oos rejected), 5 (b) -> 3/6; in scope 0, 1, 2, 5: closed
    # right 0, 1, 5 -> 3/4; rejected in scope: row 1 -> 1/4; out of scope rejected: 3 -> 1/2
    assert by["all"] == SliceRow("all", 6, 4, 2, 0.5, 0.75, 0.25, 0.5)
    # typo: rows 0, 1, 4: right row 0 -> 1/3; in scope 0, 1 (closed both right, 1 rejected);
    # out of scope row 4 answered b -> recall 0
    assert by["typo"] == SliceRow("typo", 3, 2, 1, 1 / 3, 1.0, 0.5, 0.0)
    assert by["plain"] == SliceRow("plain", 1, 1, 0, 0.0, 0.0, 0.0, None)
    assert by["negation_scope"] == SliceRow("negation_scope", 1, 1, 0, 0.0, 1.0, 1.0, None)
    assert by["oos_near_miss"] == SliceRow("oos_near_miss", 2, 0, 2, 0.5, None, None, 0.5)
    assert by["all"].to_dict()["closed_accuracy"] == 0.75


def test_slice_report_without_closed_answers_and_errors():
    rows = slice_report(["a", "oos"], ["a", None], [("x", "x"), ()])
    assert rows == [SliceRow("all", 2, 1, 1, 1.0, None, 0.0, 1.0),
                    SliceRow("x", 1, 1, 0, 1.0, None, 0.0, None)]  # a repeat counts once
    with pytest.raises(ValueError, match="2 gold labels, 1 answers"):
        slice_report(["a", "b"], ["a"], [None, None])
    with pytest.raises(ValueError, match="1 closed"):
        slice_report(["a", "b"], ["a", "b"], [None, None], closed=["a"])


def test_format_slice_table():
    table = format_slice_table(slice_report(GOLD, ANSWERS, SLICES, closed=CLOSED))
    lines = table.splitlines()
    assert lines[0].split() == ["slice", "n", "accuracy", "closed-set", "in-scope", "rejected",
                                "oos", "recall"]
    assert lines[1].split() == ["all", "6", "50.0", "75.0", "25.0", "50.0"]
    assert lines[-1].split() == ["typo", "3", "33.3", "100.0", "50.0", "0.0"]
    assert "oos_near_miss" in table and format_slice_table(
        [r.to_dict() for r in slice_report(GOLD, ANSWERS, SLICES)]).count("-") >= 6


def test_readers_carry_the_slices(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("text,label,Slices\nhi,a,typo;code_mixed\nyo,b,\"plain, numbers\"\n"
                    "ok,a,\n", encoding="utf-8")
    ds = read_examples(path)
    assert ds.slices == [("typo", "code_mixed"), ("plain", "numbers"), ()]
    assert ds[0] == Example("hi", ("a",), (), 2, ("typo", "code_mixed"))
    plain = tmp_path / "p.csv"
    plain.write_text("text,label\nhi,a\n", encoding="utf-8")
    assert read_examples(plain).slices == [None] and read_examples(plain)[0] == Example(
        "hi", ("a",), (), 2)
    lines = tmp_path / "d.jsonl"
    lines.write_text("\n".join(json.dumps(o) for o in (
        {"text": "hi", "label": "a", "slices": ["typo", "plain"]},
        {"text": "yo", "label": "b", "slices": "typo,numbers"},
        {"text": "ok", "label": "a"})) + "\n", encoding="utf-8")
    assert read_examples(lines).slices == [("typo", "plain"), ("typo", "numbers"), None]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "hi", "label": "a", "slices": 3}\n', encoding="utf-8")
    with pytest.raises(DataError, match="bad.jsonl:1: slices must be"):
        read_examples(bad)


@pytest.fixture(scope="module")
def sliced(tmp_path_factory):
    d = tmp_path_factory.mktemp("sliced")
    rows = [("我的卡丢了", "lost", "plain"), ("卡丢了怎么办", "lost", "plain"),
            ("我的card丢了", "lost", "code_mixed"), ("帮我查账单", "bill", "plain"),
            ("查一下账单", "bill", "plain"), ("帮我check账单", "bill", "code_mixed"),
            ("今天天气怎么样", "oos", "oos_far"), ("股票怎么开户", "oos", "oos_near_miss")]
    train = [(t, y) for t, y, _ in rows if y != "oos"] * 3
    trained = train_intent_classifier(train, None, IntentRecipe.from_dict({
        "architecture": {"type": "tfidf"}}),
                                      out_dir=d / "model")
    data = d / "test.csv"
    with data.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["text", "label", "slices"])
        w.writerows(rows)
    return d, trained.classifier, rows


def test_eval_prints_and_writes_the_slice_table(sliced, capsys):
    d, clf, rows = sliced
    assert main(["eval", str(d / "model"), "--data", str(d / "test.csv"),
                 "--out", str(d / "ev")]) == 0
    out = capsys.readouterr().out
    assert "per slice" in out and "code_mixed" in out and "oos_near_miss" in out
    report = json.loads((d / "ev" / "report.json").read_text(encoding="utf-8"))
    by = {r["slice"]: r for r in report["slices"]}
    assert by["all"]["n"] == 8 and by["code_mixed"]["n"] == 2 and by["oos_near_miss"]["n"] == 1
    # the same numbers as slice_report on the classifier's own answers
    probs = clf.predict_proba([t for t, _, _ in rows])
    top = [clf.labels[i] for i in probs.argmax(1)]
    answers = [y if p >= clf.threshold else None for y, p in zip(top, probs.max(1),
                                                                 strict=True)]
    expected = slice_report([y for _, y, _ in rows], answers, [(s,) for _, _, s in rows],
                            closed=top)
    assert {r.slice: r.to_dict() for r in expected} == by
    assert main(["eval", str(d / "model"), "--data", str(d / "test.csv"), "--json",
                 "--out", str(d / "ev2")]) == 0
    assert json.loads(capsys.readouterr().out)["slices"] == report["slices"]


def test_eval_without_a_slice_column_has_no_slice_table(sliced, capsys):
    d, _, rows = sliced
    plain = d / "plain.csv"
    with plain.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        w.writerows((t, y) for t, y, _ in rows)
    assert main(["eval", str(d / "model"), "--data", str(plain), "--out", str(d / "ev3")]) == 0
    assert "per slice" not in capsys.readouterr().out
    assert "slices" not in json.loads((d / "ev3" / "report.json").read_text(encoding="utf-8"))


def test_bad_cases_link_to_their_slices():
    bad = {"cases": [{"index": 2, "heads": []}, {"index": 0, "heads": []}],
           "misclassified": 2, "without_reference": 0, "heads": []}
    out = link_slices(bad, [("typo", "numbers"), None, ("typo",)])
    assert out is bad
    assert [c["slices"] for c in bad["cases"]] == [["typo"], ["typo", "numbers"]]
    assert bad["slices"] == {"typo": 2, "numbers": 1}
