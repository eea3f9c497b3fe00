"""Compound (multi-label) intents with slots: training, prediction, evaluation, persistence."""

from __future__ import annotations

import json
from datetime import date

import numpy as np
import pytest
import torch
from sklearn.metrics import f1_score

from headwise.intent.compound.classifier import CompoundClassifier
from headwise.intent.evaluation import (
    _same,
    evaluate,
    exact_match_interval,
    slice_exact_match,
    value_accuracy,
)
from headwise.intent.training.compound import encode_rows
from headwise.intent.training.pipeline import train_intent_classifier
from headwise.intent.training.recipe import IntentRecipe
from headwise.text.dataset import Example, SlotSpan

TINY = IntentRecipe.from_dict({
    "architecture": {"type": "transformer", "tokenizer": "wordpiece", "vocab_size": 120,
                     "max_length": 24, "d_model": 32, "num_layers": 1, "num_heads": 4,
                     "d_ff": 64, "dropout": 0.0, "attention_dropout": 0.0,
                     "model_overrides": {"number_heads": [0]}},
    "train": {"epochs": 25, "batch_size": 8, "lr": 3e-3, "patience": None, "progress": False},
    "task": {"type": "multi_label"}})


@pytest.fixture(scope="module")
def trained(tmp_path_factory, compound_corpus):
    out = tmp_path_factory.mktemp("compound") / "model"
    data = compound_corpus
    result = train_intent_classifier(data, data, TINY, out_dir=out)
    return result, data


def test_rows_are_multi_hot_with_aligned_tags(trained):
    result, data = trained
    clf = result.classifier
    tag_index = {t: i for i, t in enumerate(clf.slot_tags)}
    rows = encode_rows(clf.tokenizer, data[:2], clf.intents, tag_index, 24)
    assert rows[0]["labels"] == [1.0 if i in ("charge", "refund") else 0.0 for i in clf.intents]
    assert len(rows[0]["tag_labels"]) == len(rows[0]["input_ids"])
    assert rows[0]["tag_labels"][0] == -100 and rows[0]["tag_labels"][-1] == -100
    assert tag_index["B-amount_of_money"] in rows[0]["tag_labels"]


def test_learns_compound_intents_and_slots(trained):
    result, data = trained
    clf = result.classifier
    assert clf.model.config.number_heads == [0]
    assert clf.model.encoder.is_number_token.any()
    preds = clf.predict([e.text for e in data])
    got = {frozenset(n for n, _ in p.intents) for p, e in zip(preds, data, strict=True)
           if frozenset(n for n, _ in p.intents) == frozenset(e.intents)}
    exact = np.mean([frozenset(n for n, _ in p.intents) == frozenset(e.intents)
                     for p, e in zip(preds, data, strict=True)])
    assert exact >= 0.9, exact
    assert frozenset({"charge", "refund"}) in got
    spans_ok = np.mean([[(s.name, s.start, s.end) for s in p.slots]
                        == [(s.name, s.start, s.end) for s in e.slots]
                        for p, e in zip(preds, data, strict=True)])
    assert spans_ok >= 0.9, spans_ok
    assert preds[-1].out_of_scope and preds[-1].intents == []


def test_values_are_normalised_in_predictions(trained):
    result, _ = trained
    p = result.classifier.predict("refund the 300 pounds please")[0]
    assert [(s.text, s.value) for s in p.slots] == [("300 pounds",
                                                    {"amount": 300.0, "currency": "GBP"})]
    d = p.to_dict()
    assert d["slots"][0]["value"] == {"amount": 300.0, "currency": "GBP"}
    json.dumps(d)


def test_save_load_round_trip(trained, tmp_path):
    result, data = trained
    clf = result.classifier
    back = CompoundClassifier.load(result.directory)
    texts = [e.text for e in data[:8]]
    a, sa = clf.analyse(texts)
    b, sb = back.analyse(texts)
    assert np.array_equal(a, b) and sa == sb
    assert back.thresholds == clf.thresholds and back.intents == clf.intents
    with pytest.raises(FileNotFoundError, match="compound.json"):
        CompoundClassifier.load(tmp_path)


def test_evaluation_matches_sklearn(trained):
    result, data = trained
    clf = result.classifier
    report = evaluate(clf, data, reference_date=date(2026, 1, 15))
    preds = clf.predict([e.text for e in data])
    index = {n: i for i, n in enumerate(clf.intents)}
    gold = np.zeros((len(data), len(index)), bool)
    pred = np.zeros_like(gold)
    for r, (e, p) in enumerate(zip(data, preds, strict=True)):
        gold[r, [index[n] for n in e.intents]] = True
        pred[r, [index[n] for n, _ in p.intents]] = True
    assert report["intents"]["micro_f1"] == pytest.approx(f1_score(gold, pred, average="micro"))
    assert report["values"]["amount_of_money"]["normaliser"] == 1.0
    assert 0.0 <= report["slots"]["f1"] <= 1.0
    assert report["scored_as"] == "multi_label" and report["runtime"] == "torch"
    assert report["long_text"] == {"policy": "truncate", "window": None, "stride": None,
                                   "rows": 0}
    # a compound model refuses the policies that read past the first window, naming why
    with pytest.raises(ValueError, match="chunk"):
        evaluate(clf, data, long_text="chunk_max")


def test_single_label_gold_scores_a_compound_model_as_sets_of_intents(trained):
    """Single-label rows (one intent, or ``oos`` for none) against a multi-label model: the
    gold a set of zero or one intent, the answers as they are (an extra intent is wrong),
    no slots (the rows annotate none); slices give exact match per slice."""
    result, data = trained
    clf = result.classifier
    rows = [e for e in data if len(e.intents) <= 1][:10] + [data[0]]  # data[0]: two intents
    texts = [e.text for e in rows]
    labels = [e.intents[0] if e.intents else "oos" for e in rows]
    report = evaluate(clf, texts, labels)
    preds = clf.predict(texts)
    index = {n: i for i, n in enumerate(clf.intents)}
    gold = np.zeros((len(rows), len(index)), bool)
    pred = np.zeros_like(gold)
    for r, (y, p) in enumerate(zip(labels, preds, strict=True)):
        if y != "oos":
            gold[r, index[y]] = True
        pred[r, [index[n] for n, _ in p.intents]] = True
    assert report["scored_as"] == "multi_label" and "slots" not in report
    assert report["intents"]["micro_f1"] == pytest.approx(
        f1_score(gold, pred, average="micro", zero_division=0))
    assert report["intents"]["exact_match"] == pytest.approx(
        np.mean([(g == p).all() for g, p in zip(gold, pred, strict=True)]))
    # the same as the rows annotated with those intents and no slots
    same = evaluate(clf, [Example(t, () if y == "oos" else (y,), (), i + 1)
                          for i, (t, y) in enumerate(zip(texts, labels, strict=True))])
    assert same["intents"] == report["intents"]
    # slices score the sets too: exact match per slice, every row first
    sliced = evaluate(clf, texts, labels, slices=[("plain",)] * (len(texts) - 1) + [None])
    assert [(r["slice"], r["n"]) for r in sliced["slices"]] == [
        ("all", len(texts)), ("plain", len(texts) - 1)]
    assert sliced["slices"][0]["exact_match"] == pytest.approx(report["intents"]["exact_match"])


def test_value_accuracy_by_hand():
    gbp = {"currency": "GBP"}
    ex = [Example("pay 20 pounds", ("pay",), (SlotSpan(
              "amount_of_money", 4, 13, "20 pounds", {"amount": 20.0, **gbp}),), 1),
          Example("pay 30 pounds", ("pay",), (SlotSpan(
              "amount_of_money", 4, 13, "30 pounds", {"amount": 31.0, **gbp}),), 2)]
    predicted = [[SlotSpan("amount_of_money", 4, 13, "20 pounds", {"amount": 20.0, **gbp})],
                 [SlotSpan("amount_of_money", 4, 13, "30 pounds", {"amount": 30.0, **gbp})]]
    acc = value_accuracy(ex, predicted, date(2026, 1, 15))["amount_of_money"]
    # example 1 right end to end; example 2's gold value (31) disagrees with both
    assert acc == {"n": 2, "end_to_end": 0.5, "normaliser": 0.5}
    assert _same({"a": [1.0, 2]}, {"a": [1.0 + 1e-12, 2]}) and not _same(1.0, 1.1)


def _wilson(k: int, n: int, z: float = 1.959963984540054) -> list[float]:
    """The Wilson score interval, from its formula."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [centre - half, centre + half]


def test_exact_match_interval_and_slices_by_hand():
    gold = np.array([[1, 0], [1, 1], [0, 1], [1, 1]], bool)
    pred = np.array([[1, 0], [1, 0], [0, 1], [1, 1]], bool)  # row 2 misses an intent
    np.testing.assert_allclose(exact_match_interval(pred, gold), _wilson(3, 4))
    rows = slice_exact_match(pred, gold, [["plain"], ["compound", "typo"], ["typo"],
                                          ["compound", "mine"]])
    # "all" first, then the slice names in the reports' order, unknown names last
    assert [(r["slice"], r["n"], r["exact_match"]) for r in rows] == [
        ("all", 4, 0.75), ("plain", 1, 1.0), ("typo", 2, 0.5), ("compound", 2, 0.5),
        ("mine", 1, 1.0)]
    np.testing.assert_allclose(rows[3]["exact_match_interval"], _wilson(1, 2))
    with pytest.raises(ValueError, match="exact match"):
        exact_match_interval(pred[:0], gold[:0])


def test_evaluation_reports_slices_with_intervals(trained):
    result, data = trained
    slices = [["compound"] if len(e.intents) > 1 else ["plain"] for e in data]
    report = evaluate(result.classifier, data, slices=slices)
    rows = {r["slice"]: r for r in report["slices"]}
    assert rows["all"]["exact_match"] == pytest.approx(report["intents"]["exact_match"])
    assert rows["all"]["exact_match_interval"] == report["intents"]["exact_match_interval"]
    assert rows["compound"]["n"] == sum(len(e.intents) > 1 for e in data)
    with pytest.raises(ValueError, match="slice lists"):
        evaluate(result.classifier, data, slices=slices[:-1])


def test_single_intent_data_is_refused(tmp_path):
    with pytest.raises(ValueError, match="two intents"):
        one = Example("hi", ("greet",), (), 1)
        train_intent_classifier([one] * 3, None, TINY, out_dir=tmp_path)


def test_an_out_of_scope_label_as_an_intent_is_refused(tmp_path):
    """A single-label file's rows keep their label as written (``oos`` too); given to a
    multi-label run, such a row would train ``oos`` as an intent: refused, by line."""
    rows = [Example("hi", ("greet",), (), 1), Example("pay", ("pay",), (), 2),
            Example("weather?", ("oos",), (), 3)]
    with pytest.raises(ValueError, match=r"training data's row at line 3 .* 'oos'"):
        train_intent_classifier(rows, None, TINY, out_dir=tmp_path)
    with pytest.raises(ValueError, match=r"validation data's row at line 3"):
        train_intent_classifier(rows[:2], rows, TINY, out_dir=tmp_path)
    assert not (tmp_path / "compound.json").exists()


def test_unparsed_slots_of_known_kinds_are_dropped_and_unknown_kinds_kept():
    ref = date(2026, 12, 1)
    spans = [SlotSpan("date", 0, 5, "下个月5号"), SlotSpan("rate_change_bp", 6, 7, "后"),
             SlotSpan("merchant", 8, 10, "京东")]
    out = CompoundClassifier.resolve_slots(spans, ref)
    # 下个月5号 against 2026-12-01 is 2027-01-05 (by hand); 后 is no rate; merchant has no
    # normaliser, so its span stays without a value
    assert [(s.name, s.value) for s in out] == [("date", "2027-01-05"), ("merchant", None)]


def _straddling_tokenizer():
    """A SentencePiece-style Unigram tokenizer whose pieces 元的 and 的三 cross an amount's
    edges, as multilingual-e5's do, with [CLS]/[SEP] around every text."""
    import tokenizers
    from tokenizers import processors
    from tokenizers.models import Unigram

    from headwise.text.tokenizer import Tokenizer

    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    pieces = ["元的", "的三", "那", "笔", "四", "万", "六", "千", "元", "的", "三", "消费", "转",
              "退", "了"]
    backend = tokenizers.Tokenizer(Unigram([(t, 0.0) for t in special]
                                           + [(p, -1.0) for p in pieces], unk_id=1))
    backend.add_special_tokens(special)
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    return Tokenizer(backend, lowercase=False)


def test_the_predictor_cuts_amounts_whose_edges_fall_inside_a_token():
    from headwise.intent.inference import CompoundPredictor, TorchRuntime
    from headwise.intent.inference.compound import JointRow
    from headwise.models import ModelConfig
    from headwise.models.joint import JointIntentSlotModel
    from headwise.text.bio import bio_tag_names, spans_to_tags, token_offsets

    tok = _straddling_tokenizer()
    names = bio_tag_names(["amount"])
    cfg = ModelConfig(vocab_size=tok.vocab_size, d_model=8, num_layers=1, num_heads=2,
                      d_ff=16, num_labels=2, labels=["a", "b"], max_position=32,
                      pad_token_id=tok.pad_token_id, dropout=0.0,
                      model_type="joint_intent_slot", multi_label=True, slot_tags=names)
    clf = CompoundClassifier(JointIntentSlotModel(cfg).eval(), tok, ["a", "b"], max_length=32)
    predictor = CompoundPredictor(clf, TorchRuntime(clf.model))
    texts = ["那笔四万六千元的消费", "转的三万元退了"]
    amounts = ["四万六千元", "三万元"]
    offsets = token_offsets(tok, texts)
    assert [texts[0][a:b] for a, b in offsets[0][1:-1]] == ["那", "笔", "四", "万", "六", "千",
                                                            "元的", "消费"]
    assert [texts[1][a:b] for a, b in offsets[1][1:-1]] == ["转", "的三", "万", "元", "退", "了"]
    gold = [[SlotSpan("amount", t.index(a), t.index(a) + len(a), a)]
            for t, a in zip(texts, amounts, strict=True)]
    index = {n: i for i, n in enumerate(names)}
    # the tagger's output when it learnt the training tags: the straddling pieces tagged whole
    rows = [JointRow(np.zeros(2), np.array([max(t, 0) for t in spans_to_tags(o, g, index)]))
            for o, g in zip(offsets, gold, strict=True)]
    assert predictor.spans(texts, rows) == gold
    answers = predictor.decide(texts, [None, None], rows, top_k=1, threshold=0.5)
    assert [[(s.text, s.value) for s in a.slots] for a in answers] == [
        [("四万六千元", {"amount": 46000.0, "currency": "CNY"})],
        [("三万元", {"amount": 30000.0, "currency": "CNY"})]]


def test_relative_dates_follow_the_reference_date_of_each_call(trained, monkeypatch):
    result, _ = trained
    clf = result.classifier
    span = SlotSpan("date", 0, 5, "下个月5号")
    # the predictor's tagger finds one date span; the value is the classifier's to resolve
    from headwise.intent.inference import CompoundPredictor

    monkeypatch.setattr(CompoundPredictor, "spans", lambda self, texts, rows, **_: [
        [span] for _ in texts])
    by_call = clf.predict("下个月5号还款可以吗", reference_date=date(2026, 12, 1))
    assert by_call[0].slots[0].value == "2027-01-05"
    clf.reference_date = None  # default: the date of the call
    today = date.today()
    month = date(today.year + today.month // 12, today.month % 12 + 1, 5)
    assert clf.predict("下个月5号还款可以吗")[0].slots[0].value == month.isoformat()


def test_intent_biases_start_at_the_training_prior(compound_corpus):
    from headwise.intent.training.compound import compound_network, init_prior_bias

    intents = sorted({i for e in compound_corpus for i in e.intents})
    model, _, _ = compound_network(TINY, [e.text for e in compound_corpus], intents, None)
    init_prior_bias(model, compound_corpus, intents)
    want = [sum(name in e.intents for e in compound_corpus) / len(compound_corpus)
            for name in intents]  # each intent's share of the training texts, by counting
    got = torch.sigmoid(model.classifier.bias.double()).tolist()
    assert got == pytest.approx(want, abs=1e-6)
