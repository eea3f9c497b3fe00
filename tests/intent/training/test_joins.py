"""``task.compound_joins``: training rows made by joining two training rows (texts joined
by punctuation, intents united, the second text's slot spans moved), so that a model trained
on single requests learns that one message can carry two."""

from __future__ import annotations

import pytest

from headwise.intent.training.joins import join_two, joined_pairs
from headwise.intent.training.pipeline import train_intent_classifier
from headwise.intent.training.recipe import IntentRecipe
from headwise.text.dataset import Example, SlotSpan

BALANCE = Example("查一下余额", ("balance",), (), 1)
TRANSFER = Example("给妈妈转300元", ("transfer",), (SlotSpan("amount", 4, 8, "300元", 300.0),), 2)
ENGLISH = Example("freeze my card", ("freeze",), (), 3)
ASKED = Example("余额是多少？", ("balance",), (), 4)
OUT = Example("今天天气怎么样", (), (), 5)


def test_join_two_moves_the_second_texts_spans():
    joined = join_two(BALANCE, TRANSFER, "，")
    assert joined.text == "查一下余额，给妈妈转300元"
    assert joined.intents == ("balance", "transfer")
    (span,) = joined.slots
    # 5 characters and a 1-character connector before the second text: 4 + 6 = 10
    assert (span.start, span.end, span.text, span.value) == (10, 14, "300元", 300.0)
    assert joined.text[span.start:span.end] == span.text
    # the first text's spans stay; a shared intent is kept once
    back = join_two(TRANSFER, Example("再转一次", ("transfer",), (), 9), "。")
    assert back.text == "给妈妈转300元。再转一次" and back.intents == ("transfer",)
    assert back.slots == TRANSFER.slots


def joined_examples(rows: list[Example], share: float, seed: int, **length: object
                    ) -> list[Example]:
    """The rows ``joined_pairs`` draws, joined as training joins them."""
    return [join_two(rows[i], rows[j], c)
            for i, j, c in joined_pairs(rows, share, seed, **length)]


def _rows(n: int) -> list[Example]:
    rows = []
    for k in range(n):
        amount = f"{100 + k}元"
        text = f"帮我转{amount}"
        rows.append(Example(text, ("transfer",), (SlotSpan("amount", 3, 3 + len(amount), amount,
                                                           float(100 + k)),), k))
        rows.append(Example(f"查一下余额{k}", ("balance",), (), k))
        rows.append(Example(f"freeze card {k}", ("freeze",), (), k))
    return [*rows, OUT, ASKED]


def test_joined_examples_count_labels_spans_and_seed():
    rows = _rows(10)
    joined = joined_examples(rows, 0.5, seed=0)
    assert len(joined) == round(0.5 * len(rows))
    assert joined == joined_examples(rows, 0.5, seed=0)
    assert joined != joined_examples(rows, 0.5, seed=1)
    for e in joined:
        # never a shared intent, never more than the most a training row has (two, the floor)
        assert 1 <= len(e.intents) <= 2 and len(set(e.intents)) == len(e.intents)
        for s in e.slots:
            assert e.text[s.start:s.end] == s.text
        parts = [r for r in rows if e.text.startswith(r.text.rstrip())]
        assert parts, e.text
    # the connector: punctuation by script, nothing after a text that ends a sentence
    texts = {e.text for e in joined_examples(rows, 3.0, seed=0)}
    assert any("，" in t or "。" in t for t in texts)
    assert any(", " in t or ". " in t for t in texts if t.startswith("freeze"))
    assert not any(t.startswith("余额是多少？，") for t in texts)
    assert any(t.startswith("余额是多少？") and len(t) > 6 for t in texts)


def test_joined_examples_fit_the_model_and_refuse_bad_input():
    rows = _rows(10)
    joined = joined_examples(rows, 1.0, seed=0, fits=lambda ts: [len(t) for t in ts],
                             max_length=16)
    assert joined and all(len(e.text) <= 16 for e in joined)
    # nothing fits: fewer rows than asked, not an endless loop
    assert joined_examples(rows, 1.0, seed=0, fits=lambda ts: [99] * len(ts),
                           max_length=16) == []
    assert joined_examples(rows, 0.0, seed=0) == []
    assert joined_examples([BALANCE, OUT], 1.0, seed=0) == []  # one labelled row: no pair
    with pytest.raises(ValueError, match=">= 0"):
        joined_examples(rows, -0.5, seed=0)
    with pytest.raises(ValueError, match="max_length"):
        joined_examples(rows, 0.5, seed=0, fits=lambda ts: [1] * len(ts))
    with pytest.raises(ValueError, match="task.compound_joins"):
        IntentRecipe.from_dict({"architecture": {"type": "bilstm"},
                                "task": {"type": "multi_label", "compound_joins": -1}})


#: four intents, each phrased three ways; training holds single requests only
TEMPLATES = {
    "balance": ["查一下余额", "我卡里还有多少钱", "余额是多少"],
    "freeze": ["帮我冻结银行卡", "把卡锁上", "卡先冻起来"],
    "transfer": ["给妈妈转钱", "帮我转账给张三", "我要转钱到储蓄卡"],
    "bill": ["看看这个月账单", "账单在哪里查", "本月账单多少"],
}


def _recipe(joins: float) -> IntentRecipe:
    return IntentRecipe.from_dict({
        "architecture": {"type": "bilstm", "tokenizer": "char", "max_length": 32,
                         "lstm_embed_dim": 32, "lstm_hidden": 32, "dropout": 0.0},
        "train": {"epochs": 25, "batch_size": 8, "lr": 5e-3, "patience": None, "seed": 0,
                  "progress": False},
        "task": {"type": "multi_label", "compound_joins": joins}})


def test_joined_rows_teach_a_single_request_model_to_read_two(tmp_path):
    train = [Example(t, (i,), (), k) for k, (i, ts) in enumerate(TEMPLATES.items())
             for t in ts for _ in range(3)]
    valid = [Example(t, (i,), (), 0) for i, ts in TEMPLATES.items() for t in ts]
    names = list(TEMPLATES)
    # two requests joined by words no training row has
    pairs = [(a, b) for a in names for b in names if a < b]
    test = [f"{TEMPLATES[a][k]}，还有{TEMPLATES[b][(k + 1) % 3]}"
            for a, b in pairs for k in range(3)]
    gold = [{a, b} for a, b in pairs for _ in range(3)]
    scores = {}
    for joins in (0.0, 1.0):
        clf = train_intent_classifier(train, valid, _recipe(joins),
                                      out_dir=tmp_path / str(joins)).classifier
        assert clf.info["joined_rows"] == round(joins * len(train))
        answers = clf.predict(test)
        scores[joins] = sum({name for name, _ in a.intents} == g
                            for a, g in zip(answers, gold, strict=True)) / len(test)
    assert scores[1.0] >= 0.5 and scores[1.0] >= scores[0.0] + 0.3, scores


def test_the_default_share_is_the_architecture_s_and_recorded_as_used(tmp_path):
    """``task.compound_joins`` None is the architecture's share (DEFAULT_COMPOUND_JOINS,
    chosen per family on validation): the run adds that many joined rows and its saved
    recipe records the share used; a given share is kept."""
    from headwise.intent.training.defaults import DEFAULT_COMPOUND_JOINS

    def recipe(kind: str, **task) -> IntentRecipe:
        return IntentRecipe.from_dict({"architecture": {"type": kind},
                                       "task": {"type": "multi_label", **task}})

    assert DEFAULT_COMPOUND_JOINS == {"transformer": 1.0, "bilstm": 0.5, "pretrained": 1.0}
    assert recipe("bilstm").task.compound_joins is None
    assert [recipe(k).compound_joins for k in ("bilstm", "transformer")] == [0.5, 1.0]
    assert recipe("transformer", compound_joins=0.0).compound_joins == 0.0
    with pytest.raises(ValueError, match="multi-label recipe's"):
        _ = IntentRecipe.from_dict({"architecture": {"type": "bilstm"}}).compound_joins
    train = [Example(t, (i,), (), k) for k, (i, ts) in enumerate(TEMPLATES.items())
             for t in ts]
    default = _recipe(0.0).replace(task__compound_joins=None, train__epochs=1)
    info = train_intent_classifier(train, train, default, out_dir=tmp_path).classifier.info
    assert info["recipe"]["task"]["compound_joins"] == 0.5  # the BiLSTM's
    assert info["joined_rows"] == round(0.5 * len(train))
