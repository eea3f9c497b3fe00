"""Slot values by slot name: the demo corpus's formats (every slot of the corpus) and NLU++'s."""

from __future__ import annotations

from collections import Counter
from datetime import date

import pytest

from headwise.demo.corpus import generate_demo_corpus
from headwise.slots import REFERENCE_DATES, normalize_slot


@pytest.fixture(scope="module")
def demo_slots():
    corpus = generate_demo_corpus(seed=0)
    return [slot for split in corpus.values() for ex in split for slot in ex.slots]


def test_every_demo_corpus_slot_normalises_to_its_value(demo_slots):
    names = Counter(slot.name for slot in demo_slots)
    assert set(names) == {"amount", "rate_change_bp", "rate_spread_bp", "rate_percent",
                          "ordinal", "duration_months", "date", "card_tail"}
    wrong = []
    for slot in demo_slots:
        try:
            got = normalize_slot(slot.name, slot.text)
        except ValueError as e:
            got = e
        if got != slot.value or type(got) is not type(slot.value):
            wrong.append((slot.name, slot.text, got, slot.value))
    agreement = 1 - len(wrong) / len(demo_slots)
    assert not wrong, f"agreement {agreement:.2%} over {len(demo_slots)} slots; {wrong[:10]}"


def test_a_smaller_corpus_of_another_seed_agrees_too():
    corpus = generate_demo_corpus(seed=3, per_intent=30, oos=10)
    slots = [slot for split in corpus.values() for ex in split for slot in ex.slots]
    assert slots
    assert all(normalize_slot(s.name, s.text) == s.value for s in slots)


DEMO = [
    ("amount", "三千五百元", {"amount": 3500.0, "currency": "CNY"}),
    ("amount", "1.5万", {"amount": 15000.0, "currency": "CNY"}),
    ("amount", "$20", {"amount": 20.0, "currency": "USD"}),
    ("rate_change_bp", "下调25个基点", -25),
    ("rate_change_bp", "上调了10BP", 10),
    ("rate_spread_bp", "LPR加55个基点", 55),
    ("rate_spread_bp", "七十五bp", 75),
    ("rate_percent", "百分之三点八五", 3.85),
    ("ordinal", "第二十一期", 21),
    ("duration_months", "两年", 24),
    ("date", "每月10号", "R/2026-02-10/P1M"),
    ("date", "下个月5号", "2026-02-05"),
    ("date", "下周", {"start": "2026-01-19", "end": "2026-01-25"}),
    ("card_tail", "0495", "0495"),
    ("card_tail", "尾号1234", "1234"),
    ("card_tail", "ending in 9876", "9876"),
]


@pytest.mark.parametrize(("name", "text", "expected"), DEMO, ids=[f"{n}:{t}" for n, t, _ in DEMO])
def test_demo_slot_formats(name, text, expected):
    got = normalize_slot(name, text)
    assert got == expected and type(got) is type(expected)


# NLU++-style examples written by hand; the corpus resolves them against Tuesday 2022-03-15
NLUPP = [
    ("amount_of_money", "73 pounds", {"amount": 73.0, "currency": "GBP"}),
    ("amount_of_money", "400", {"amount": 400.0, "currency": "ambiguous"}),
    ("amount_of_money", "1 thousand dollars", {"amount": 1000.0, "currency": "USD"}),
    ("amount_of_money", "68.26$", {"amount": 68.26, "currency": "USD"}),
    ("number", "6", 6),
    ("time", "9 05 in the morning", {"hour": 9, "minute": 5}),
    ("time", "25 to 7 p.m.", {"hour": 18, "minute": 35}),
    ("time", "half past 3 night", {"hour": 3, "minute": 30}),
    ("time_to", "5 to 8", {"hour": 7, "minute": 55}),
    ("date", "tomorrow", {"day": 16, "month": 3, "year": 2022}),
    ("date", "last Monday", {"day": 14, "month": 3, "year": 2022}),
    ("date", "Tuesday", {"day": 22, "month": 3, "year": 2022}),
    ("date", "8 weeks ago", {"day": 18, "month": 1, "year": 2022}),
    ("date", "Jan the 19th", {"day": 19, "month": 1, "year": 2023}),
    ("date", "6th of March", {"day": 6, "month": 3, "year": 2022}),
    ("date", "some days ago", "ambiguous"),
    ("date_to", "next Sunday", {"day": 27, "month": 3, "year": 2022}),
    ("date_to", "May", {"day": 31, "month": 5, "year": 2022}),
    ("date_from", "April", {"day": 1, "month": 4, "year": 2022}),
    ("date_period", "next week", {"type": "absolute", "from": {"day": 21, "month": 3, "year": 2022},
                                  "to": {"day": 27, "month": 3, "year": 2022}}),
    ("date_period", "last month", {"type": "absolute", "from": {"day": 1, "month": 2, "year": 2022},
                                   "to": {"day": 28, "month": 2, "year": 2022}}),
    ("date_period", "4th of each month", {"type": "periodic"}),
    ("date_period", "two weeks", {"type": "relative", "days": 14}),
    ("date_period", "monthly", {"type": "relative", "days": 30}),
    ("date_period", "lately", {"type": "ambiguous"}),
]


@pytest.mark.parametrize(("name", "text", "expected"), NLUPP,
                         ids=[f"{n}:{t}" for n, t, _ in NLUPP])
def test_nlupp_slot_formats(name, text, expected):
    assert normalize_slot(name, text, schema="nlupp") == expected


def test_schema_and_reference_resolution():
    assert REFERENCE_DATES == {"demo": date(2026, 1, 15), "nlupp": date(2022, 3, 15)}
    # a name only NLU++ uses needs no schema; "date" is the demo corpus's unless told
    assert normalize_slot("time", "half past 3") == {"hour": 3, "minute": 30}
    assert normalize_slot("date", "tomorrow") == "2026-01-16"
    assert normalize_slot("date", "tomorrow", schema="nlupp") == {"day": 16, "month": 3,
                                                                 "year": 2022}
    assert normalize_slot("date", "明天", reference=date(2025, 12, 31)) == "2026-01-01"


@pytest.mark.parametrize(("name", "text", "kwargs", "message"), [
    ("colour", "red", {}, "unknown slot"),
    ("amount", "红色", {}, "not an amount"),
    ("card_tail", "12345", {}, "four digits"),
    ("amount", "", {}, "empty"),
    ("date", "明天", {"schema": "other"}, "unknown schema"),
    ("amount", "3500元", {"schema": "nlupp"}, "unknown slot"),
    ("date", "每月10号", {"schema": "nlupp"}, "recurrence"),
])
def test_slot_errors(name, text, kwargs, message):
    with pytest.raises(ValueError, match=message):
        normalize_slot(name, text, **kwargs)
