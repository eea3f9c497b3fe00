"""The data doctor (headwise.intent.doctor, `headwise doctor`) on a corpus with planted
problems whose rows are known: every planted problem found, with the right suggestion, the
report offline, the cleaned copy right and the input untouched."""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import itertools

import numpy as np
import pytest
from tiny_corpus import write_csv

from headwise.cli import main
from headwise.intent.doctor import examine, fixed_rows, normalise

SUBJECTS = ["my card", "my debit card", "the credit card", "my new card", "the old card",
            "my visa card"]
FRAMES = {
    "card_lost": ["i lost {s}", "{s} was stolen", "cannot find {s} anywhere",
                  "someone took {s}", "{s} is missing since monday"],
    "card_limit": ["raise the limit of {s}", "increase the spending limit on {s}",
                   "{s} limit is too low", "what is the limit of {s}",
                   "higher limit for {s} please"],
    "card_fee": ["why is there a fee on {s}", "annual fee of {s}", "{s} charged a fee",
                 "waive the fee for {s}", "how much is the fee of {s}"],
    "card_pin": ["change the pin of {s}", "forgot the pin of {s}", "{s} pin is blocked",
                 "reset the pin on {s}", "new pin for {s}"],
}
#: rows whose label is flipped: (text, the true intent, the label written)
FLIPS = [("i lost my visa card", "card_lost", "card_fee"),
         ("raise the limit of my new card", "card_limit", "card_pin"),
         ("forgot the pin of the old card", "card_pin", "card_limit")]


def _corpus() -> list[tuple[str, str]]:
    rows = [(f.format(s=s), k) for k, frames in FRAMES.items()
            for f, s in itertools.product(frames, SUBJECTS)]
    flipped = {t: y for t, _, y in FLIPS}
    rows = [(t, flipped.get(t, y)) for t, y in rows]
    rows += [("I LOST MY CARD!", "card_lost"),            # a duplicate, same label
             ("annual fee of my card ", "card_limit"),    # a duplicate, another label
             ("someone took my debit cardd", "card_lost"),  # a near duplicate
             ("close my account", "close"), ("shut down my account", "close"),
             ("please close my account now", "close")]    # an intent with 3 rows
    return rows




def test_normalise_folds_case_width_space_and_final_punctuation():
    assert normalise(" Ｉ lost  MY card！") == normalise("i lost my card") == "ilostmycard"
    assert normalise("我的卡丢了？") == "我的卡丢了"


def test_every_planted_problem_is_found_with_its_suggestion():
    rows = _corpus()
    texts, labels = [t for t, _ in rows], [y for _, y in rows]
    lines = list(range(2, len(rows) + 2))  # a CSV's data starts on line 2
    line_of = {t: n for t, n in zip(texts, lines, strict=True)}
    exam = examine(texts, labels, lines, valid=(["i lost my card", "hello"], [2, 3]))
    by = {}
    for f in exam.findings:
        by.setdefault(f.issue, []).append(f)
    dup = by["duplicate"]
    assert [(f.row, f.other_row) for f in dup] == [(line_of["I LOST MY CARD!"],
                                                    line_of["i lost my card"])]
    (conflict,) = by["conflicting_duplicate"]
    assert conflict.row == line_of["annual fee of my card "]
    assert (conflict.suggested_label, conflict.other_row) == ("card_fee",
                                                              line_of["annual fee of my card"])
    near = {f.row: f for f in by["near_duplicate"]}  # the planted one, and template variants
    planted = near[line_of["someone took my debit cardd"]]
    assert planted.other_row == line_of["someone took my debit card"] and planted.score >= 0.9
    assert all(f.score >= 0.9 and f.other_row < f.row and f.label == labels[lines.index(
        f.other_row)] for f in near.values())
    flagged = {f.row: f.suggested_label for f in by["label_issue"]}
    for text, true, _ in FLIPS:  # every flipped row, with the intent it really has
        assert flagged.get(line_of[text]) == true, (text, flagged)
    assert len(flagged) <= len(FLIPS) + 2  # few false alarms on a clean corpus
    assert {f.label for f in by["few_rows"]} == {"close"} and len(by["few_rows"]) == 3
    (leak,) = by["leakage"]
    assert (leak.file, leak.row, leak.suggested_label) == ("valid", 2, "card_lost")
    assert exam.confusions and exam.intents["close"] == 3
    assert exam.counts["label_issue"] == len(flagged)


def test_the_fixed_rows():
    rows = _corpus()
    texts, labels = [t for t, _ in rows], [y for _, y in rows]
    lines = list(range(2, len(rows) + 2))
    exam = examine(texts, labels, lines)
    relabelled = {t: y for _, t, y in fixed_rows(texts, labels, lines, exam, "relabel")}
    for text, true, _ in FLIPS:
        assert relabelled[text] == true
    assert "I LOST MY CARD!" not in relabelled and "annual fee of my card " not in relabelled
    dropped = {t: y for _, t, y in fixed_rows(texts, labels, lines, exam, "drop")}
    assert not set(dropped) & {t for t, _, _ in FLIPS}
    gone = {f.row for f in exam.findings if f.issue in (
        "duplicate", "conflicting_duplicate", "conflicting_near_duplicate", "label_issue")}
    assert len(dropped) == len(rows) - len(gone)
    assert "someone took my debit cardd" in dropped  # a same-label near duplicate stays
    with pytest.raises(ValueError, match="drop or relabel"):
        fixed_rows(texts, labels, lines, exam, "fix")


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="at least two"):
        examine(["a", "b"], ["x", "x"])
    with pytest.raises(ValueError, match="needs a label"):
        examine(["a", "b"], ["x", None])
    with pytest.raises(ValueError, match="near must be"):
        examine(["a", "b"], ["x", "y"], near=0)
    with pytest.raises(ValueError, match="jobs must be"):
        examine(["a", "b"], ["x", "y"], jobs=0)


def test_worker_processes_find_what_one_process_finds():
    """``jobs=2`` fits the folds in two worker processes: the same findings as ``jobs=1``."""
    rows = _corpus()
    texts, labels = [t for t, _ in rows], [y for _, y in rows]
    one, two = (examine(texts, labels, jobs=j) for j in (1, 2))
    assert [dataclasses.astuple(f) for f in one.findings] == \
        [dataclasses.astuple(f) for f in two.findings]
    assert one.confusions == two.confusions and one.oos_bound == two.oos_bound


def test_the_command_writes_an_offline_report_and_a_cleaned_copy(tmp_path, capsys):
    data = write_csv(tmp_path / "train.csv", _corpus())
    valid = write_csv(tmp_path / "valid.csv", [("i lost my card", "card_lost")])
    before = hashlib.sha256(data.read_bytes()).hexdigest()
    out = tmp_path / "report"
    assert main(["doctor", str(data), "--valid", str(valid), "--out", str(out), "--fix",
                 "relabel", "--out-data", str(tmp_path / "clean" / "train.csv")]) == 0
    printed = capsys.readouterr().out
    assert "label_issue 3" in printed or "label_issue" in printed
    with open(out / "issues.csv", newline="", encoding="utf-8") as f:
        issues = list(csv.DictReader(f))
    assert {"row", "text", "label", "issue", "suggested_label"} <= set(issues[0])
    assert {r["issue"] for r in issues} >= {"label_issue", "duplicate", "leakage"}
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "http://" not in page and "https://" not in page and "<script" not in page
    assert "label_issue" in page and (out / "summary.json").is_file()
    with open(tmp_path / "clean" / "train.csv", newline="", encoding="utf-8") as f:
        cleaned = {r["text"]: r["label"] for r in csv.DictReader(f)}
    assert all(cleaned[t] == true for t, true, _ in FLIPS)
    assert hashlib.sha256(data.read_bytes()).hexdigest() == before  # the input untouched
    assert main(["doctor", str(data), "--out", str(out), "--fix", "drop"]) == 1
    assert "--fix and --out-data go together" in capsys.readouterr().err
    assert main(["doctor", str(data), "--out", str(out), "--fix", "drop", "--out-data",
                 str(data)]) == 1
    assert "never overwrites its input" in capsys.readouterr().err


# -- multi-label rows ------------------------------------------------------------------------
AMOUNTS = ["20", "50", "300", "75", "90", "120", "45", "60"]
SET_FRAMES = {
    ("charge",): ["why was i charged {a} pounds", "there is a charge of {a} pounds i do not know",
                  "what is this {a} pounds charge"],
    ("refund",): ["refund the {a} pounds please", "i want my {a} pounds back",
                  "give me a refund of {a} pounds"],
    ("transfer",): ["send {a} pounds to my sister", "transfer {a} pounds to my savings",
                    "move {a} pounds to john"],
    ("charge", "refund"): ["i was charged twice for {a} pounds refund it",
                           "a wrong charge of {a} pounds, i want it back"],
}
#: rows whose intent set is wrong: text -> (the true set, the set written)
SET_FLIPS = {"i was charged twice for 75 pounds refund it": (("charge", "refund"), ("charge",)),
             "send 90 pounds to my sister": (("transfer",), ("refund", "transfer")),
             "i want my 45 pounds back": (("refund",), ("transfer",))}


def _multi_label_corpus() -> list[tuple[str, tuple[str, ...]]]:
    rows = [(f.format(a=a), k) for k, frames in SET_FRAMES.items()
            for f, a in itertools.product(frames, AMOUNTS)]
    rows = [(t, SET_FLIPS[t][1] if t in SET_FLIPS else k) for t, k in rows]
    return rows + [("what is the weather today", ())] * 2 + [
        ("Refund the 20 pounds please!", ("charge",))]  # a repeat with another intent set


def test_multi_label_rows_are_examined_on_their_intent_sets():
    rows = _multi_label_corpus()
    texts, sets = [t for t, _ in rows], [y for _, y in rows]
    line_of = {t: i + 1 for i, t in enumerate(texts)}
    exam = examine(texts, sets)
    assert exam.multi_label and exam.intents == {"charge": 41, "refund": 39, "transfer": 25}
    by: dict[str, list] = {}
    for f in exam.findings:
        by.setdefault(f.issue, []).append(f)
    (conflict,) = by["conflicting_duplicate"]
    assert (conflict.row, conflict.label, conflict.suggested_label, conflict.other_row) == (
        len(rows), "charge", "refund", line_of["refund the 20 pounds please"])
    (dup,) = by["duplicate"]  # the two rows without an intent
    assert (dup.label, dup.other_row) == ("oos", len(rows) - 2)
    flagged = {f.row: f for f in by["label_issue"]}
    for text, (true, written) in SET_FLIPS.items():  # each with the set it really has
        f = flagged[line_of[text]]
        assert f.label == "+".join(sorted(written)) and f.suggested_label == "+".join(true)
        assert 0.5 <= f.score <= 1.0
    assert set(flagged) <= {line_of[t] for t in SET_FLIPS} | {len(rows)}
    # one-vs-rest confusions: the flipped refund row predicted refund instead of transfer
    assert ("transfer", "refund") in {(c.label, c.predicted) for c in exam.confusions}
    fixed = {t: y for _, t, y in fixed_rows(texts, sets, list(range(1, len(rows) + 1)), exam,
                                            "relabel")}
    for text, (true, _) in SET_FLIPS.items():
        assert fixed[text] == true
    assert "Refund the 20 pounds please!" not in fixed


def test_multi_label_intents_must_not_hold_the_join():
    with pytest.raises(ValueError, match="contain '\\+'"):
        examine(["a", "b", "c", "d"], [("x+y",), ("x",), ("y",), ("x",)])
    with pytest.raises(ValueError, match="an intent set"):
        examine(["a", "b", "c", "d"], [("x",), "y", ("y",), ("x",)])


def test_the_command_reads_multi_label_json_and_keeps_each_row_as_it_was(tmp_path, capsys):
    import json

    data = tmp_path / "train.jsonl"
    with open(data, "w", encoding="utf-8") as f:
        for t, y in _multi_label_corpus():
            f.write(json.dumps({"text": t, "intents": list(y), "id": len(t)}) + "\n")
    out = tmp_path / "report"
    assert main(["doctor", str(data), "--out", str(out), "--fix", "relabel", "--out-data",
                 str(tmp_path / "clean.jsonl")]) == 0
    with open(out / "issues.csv", newline="", encoding="utf-8") as f:
        issues = {(r["text"], r["issue"]): r for r in csv.DictReader(f)}
    row = issues[("i was charged twice for 75 pounds refund it", "label_issue")]
    assert (row["label"], row["suggested_label"]) == ("charge", "charge+refund")
    assert "several intents each" in (out / "index.html").read_text(encoding="utf-8")
    cleaned = [json.loads(x) for x in (tmp_path / "clean.jsonl").read_text().splitlines()]
    by_text = {r["text"]: r for r in cleaned}
    assert by_text["send 90 pounds to my sister"] == {
        "text": "send 90 pounds to my sister", "intents": ["transfer"], "id": 27}
    assert "Refund the 20 pounds please!" not in by_text and len(cleaned) == len(
        _multi_label_corpus()) - 2


# -- template intents ------------------------------------------------------------------------
def test_skeleton_by_hand():
    from headwise.intent.doctor.templates import form, skeleton

    assert form("I lost  ＭＹ card №12,000.50 ") == "i lost my card no#"  # NFKC: № is No
    # "i lost my card" / "i lost my visa card": "i lost my " and "card", 14 of 19 characters
    assert skeleton("i lost my card", "i lost my visa card") == "i lost my … card"
    assert skeleton("我的卡丢了", "我的信用卡丢了") == "我的…卡丢了"  # 5 of 7
    assert skeleton("why was i charged #", "why was i charged #") == "why was i charged #"
    assert skeleton("i lost my card", "raise my limit") is None
    # 6 of 11 characters in common: under the 60 % the rule asks
    assert skeleton("abcdefghijk", "abcxxxxxijk") is None
    assert skeleton("abcdefghijk", "abcdxxxhijk") == "abcd…hijk"  # 8 of 11


def test_template_intents_by_hand():
    from headwise.intent.doctor.templates import template_intents

    texts = ["i lost my card", "i lost my visa card", "i lost my old card", "hello there",
             "raise the limit", "what is the limit on my card", "limit too low", "more limit"]
    keys = ["lost"] * 4 + ["limit"] * 4
    everyone = np.tile(np.arange(len(texts)), (len(texts), 1))  # every row a neighbour
    (t,) = template_intents(texts, keys, keys, list(range(1, 9)), everyone, share=0.5,
                            min_rows=4)
    # three of four "lost" rows are one-span variants of another; "limit" has none
    assert (t.intent, t.rows, t.copies, t.share) == ("lost", 4, 3, 0.75)
    assert t.skeleton == "i lost my … card" and t.example_row == 1
    assert template_intents(texts, keys, keys, list(range(1, 9)), everyone, share=0.8,
                            min_rows=4) == []


def test_templated_corpus_is_reported_and_the_report_says_so(tmp_path):
    rows = _corpus()
    exam = examine([t for t, _ in rows], [y for _, y in rows])
    # every card intent is built from 5 frames x 6 subjects, "close" has 3 rows
    assert {t.intent for t in exam.templates} == set(FRAMES)
    assert all(t.share > 0.9 and "…" in t.skeleton for t in exam.templates)
    from headwise.intent.doctor import write_report

    write_report(exam, tmp_path, "train.csv")
    page = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert "Intents made of one template (4)" in page and exam.templates[0].skeleton in page
    assert "Time of each step" in page and "out-of-fold probabilities" in exam.steps


# -- rows that look out of scope -----------------------------------------------------------
#: questions no intent covers, sharing no word with the corpus
STRAY = [("tell me a joke about cats", "card_pin"), ("wifi password?", "card_lost"),
         ("book a taxi to the airport", "card_limit")]


def test_rows_that_look_out_of_scope():
    rows = _corpus() + STRAY
    texts, labels = [t for t, _ in rows], [y for _, y in rows]
    folds = []
    exam = examine(texts, labels, progress=lambda done, total: folds.append((done, total)))
    assert folds == [(1, 3), (2, 3), (3, 3)]  # "close" has 3 rows: 3 folds
    oos = {f.text: f for f in exam.findings if f.issue == "looks_out_of_scope"}
    assert {t for t, _ in STRAY} <= set(oos)
    assert exam.oos_bound is not None and all(f.score < exam.oos_bound for f in oos.values())
    lowest = sorted(oos.values(), key=lambda f: f.score)[:len(STRAY)]
    assert {f.text for f in lowest} == {t for t, _ in STRAY}  # the least sure of all
    # the bound is the 5 % quantile of the rows the model gets right: few others fall under
    assert len(oos) <= len(STRAY) + 0.06 * len(rows)
    assert not any(f.label == "close" for f in oos.values())  # a few-rows intent is not judged
    kept = {t for _, t, _ in fixed_rows(texts, labels, list(range(1, len(rows) + 1)), exam,
                                        "drop")}
    assert {t for t, _ in STRAY} <= kept  # a finding, never a drop
    with pytest.raises(ValueError, match="oos_quantile"):
        examine(texts, labels, oos_quantile=0.9)


# -- --model: a saved model's features -------------------------------------------------------
def _tiny_network(tmp_path, texts):
    import torch

    from headwise.intent.classifier import IntentClassifier
    from headwise.models import EncoderClassifier, ModelConfig
    from headwise.text.tokenizer import Tokenizer

    tok = Tokenizer.train_wordpiece(list(texts) * 2, 200, min_frequency=1)
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=tok.vocab_size, d_model=32, num_layers=1, num_heads=4,
                      d_ff=64, num_labels=2, labels=["a", "b"], max_position=64,
                      pad_token_id=tok.pad_token_id, dropout=0.0)
    IntentClassifier(EncoderClassifier(cfg), tok, ["a", "b"], max_length=32).save(
        tmp_path / "net")
    return tmp_path / "net"


def test_a_network_gives_its_frozen_embeddings(tmp_path):
    from cleanlab.filter import find_label_issues as cl_find
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from headwise.intent.classifier import IntentClassifier

    rows = _corpus()
    texts, labels = [t for t, _ in rows], [y for _, y in rows]
    net = _tiny_network(tmp_path, texts)
    exam = examine(texts, labels, model=net, near=0.97, folds=3)
    assert "frozen sentence embeddings" in exam.probabilities and str(net) in exam.similarity
    assert "model features" in exam.steps
    # the reference: scikit-learn's own cross-validation of the same head on the same
    # vectors, and cleanlab called directly
    x, _ = IntentClassifier.load(net).features_and_logits(texts)
    intents = sorted(set(labels))  # every intent has at least 3 rows: all rows, 3 folds
    y = np.array([intents.index(k) for k in labels])
    probs = cross_val_predict(make_pipeline(StandardScaler(), LogisticRegression(
        C=1.0, max_iter=300)), x, y, cv=StratifiedKFold(3, shuffle=True, random_state=0),
        method="predict_proba")
    # n_jobs=1 as the library calls it: a forked pool in a threaded test worker can deadlock
    expected = {i + 1 for i in np.flatnonzero(cl_find(y, probs, n_jobs=1))}
    assert {f.row for f in exam.findings if f.issue == "label_issue"} == expected
    # near duplicates by the embeddings' cosine, centred
    u = x - x.mean(0)
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    near = [f for f in exam.findings if f.issue.endswith("near_duplicate")]
    for f in near:
        assert f.score == pytest.approx(float(u[f.row - 1] @ u[f.other_row - 1]), abs=1e-4)
        assert f.score >= 0.97 and f.other_row < f.row
    cos = u @ u.T
    norm = [normalise(t) for t in texts]
    dup = {f.row for f in exam.findings if f.issue.endswith("duplicate")
           and not f.issue.endswith("near_duplicate")}
    for i in range(len(texts)):  # every row with a close earlier neighbour is reported
        if i + 1 not in dup and any(cos[i, j] >= 0.97 and norm[j] != norm[i]
                                    for j in range(i)):
            assert any(f.row == i + 1 for f in near), texts[i]


def test_a_tfidf_model_gives_its_recipe_and_the_flips_are_found(tmp_path):
    from headwise.intent.tfidf import TfidfClassifier

    rows = _corpus()
    texts, labels = [t for t, _ in rows], [y for _, y in rows]
    TfidfClassifier.fit(texts, labels).save(tmp_path / "tfidf")
    exam = examine(texts, labels, model=tmp_path / "tfidf")
    assert exam.probabilities.startswith("TF-IDF + logistic regression fitted in 3-fold "
                                         "cross-validation with the recipe of the TF-IDF model")
    assert "(C=10, class weights None)" in exam.probabilities
    line = {t: i + 1 for i, t in enumerate(texts)}
    flagged = {f.row: f.suggested_label for f in exam.findings if f.issue == "label_issue"}
    for text, true, _ in FLIPS:
        assert flagged.get(line[text]) == true


def test_a_model_without_one_encoder_is_refused(tmp_path):
    from headwise.intent.doctor import model_features
    from headwise.intent.ensemble import EnsembleClassifier
    from headwise.intent.tfidf import TfidfClassifier

    with pytest.raises(FileNotFoundError, match="no model directory"):
        model_features(tmp_path / "none", ["a"])
    texts, labels = ["lost card", "card fee", "lost my card", "fee of card"], ["a", "b"] * 2
    members = [TfidfClassifier.fit(texts, labels, c=c) for c in (1.0, 10.0)]
    EnsembleClassifier(members).save(tmp_path / "ens")
    with pytest.raises(ValueError, match="no single encoder.*member-0"):
        model_features(tmp_path / "ens", texts)


def test_the_command_with_a_model_says_what_gave_the_probabilities(tmp_path, capsys):
    import json

    rows = _corpus()
    net = _tiny_network(tmp_path, [t for t, _ in rows])
    data = write_csv(tmp_path / "train.csv", rows)
    out = tmp_path / "report"
    assert main(["doctor", str(data), "--model", str(net), "--near", "0.97", "--out",
                 str(out)]) == 0
    assert "model features" in capsys.readouterr().out  # the time of each step
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["probabilities"].startswith("a logistic-regression head fitted in 3-fold "
                                               "cross-validation on the frozen sentence "
                                               "embeddings")
    assert set(summary["steps"]) >= {"model features", "duplicates", "templates",
                                     "out-of-fold probabilities", "label issues"}
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "frozen sentence embeddings" in page and "https://" not in page
    assert main(["doctor", str(data), "--model", str(tmp_path / "nowhere"), "--out",
                 str(out)]) == 1
    assert "no model directory" in capsys.readouterr().err


def test_a_compound_model_gives_the_vectors_its_intent_head_reads(tmp_path):
    import torch

    from headwise.intent.compound.classifier import CompoundClassifier
    from headwise.intent.doctor import model_features
    from headwise.models import ModelConfig
    from headwise.models.joint import JointIntentSlotModel
    from headwise.text.tokenizer import Tokenizer

    rows = _multi_label_corpus()
    texts, sets = [t for t, _ in rows], [y for _, y in rows]
    tok = Tokenizer.train_wordpiece(texts * 2, 200, min_frequency=1)
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=tok.vocab_size, d_model=16, num_layers=1, num_heads=2,
                      d_ff=32, num_labels=3, labels=["charge", "refund", "transfer"],
                      max_position=64, pad_token_id=tok.pad_token_id, dropout=0.0,
                      model_type="joint_intent_slot", multi_label=True, slot_tags=None)
    model = JointIntentSlotModel(cfg).eval()
    CompoundClassifier(model, tok, ["charge", "refund", "transfer"], max_length=32).save(
        tmp_path / "cmp")
    got = model_features(tmp_path / "cmp", texts[:12], batch_size=5)
    assert "16 dimensions) of a compound (multi-label + slots) classifier" in got.source
    with torch.no_grad():  # one text at a time, no padding: the reference
        for i, t in enumerate(texts[:12]):
            ids = torch.tensor([tok([t], max_length=32)["input_ids"][0].tolist()])
            ids = ids[:, :int((ids != tok.pad_token_id).sum())]
            mask = torch.ones_like(ids, dtype=torch.bool)
            want = model.pool(model.encode(ids, mask), mask)[0].double().numpy()
            np.testing.assert_allclose(got.values[i], want, atol=1e-5)
    exam = examine(texts, sets, model=tmp_path / "cmp")
    assert exam.multi_label and "frozen sentence embeddings" in exam.probabilities
