"""Slot spans written by hand, not by the demo corpus's generator, each with its value worked
out by hand: the normaliser's "100 %" on the corpus (tests/slots/test_value_slots.py) is
measured on spans that the same numeral code wrote, so it cannot show a phrasing the
generator never produces. These are the plain ways customers type amounts, dates,
instalments and rates.

Demo schema (``normalize_slot(name, text)``): relative dates resolve against its reference,
Thursday 2026-01-15; an amount that names no currency is CNY. Bugs these spans found, fixed
in headwise/slots/: ``2w`` / ``1.5w`` (w for 万), ``5000元整``, ``3/15`` and ``15/3`` (the
only reading of month and day), ``年化收益率3.2%``, ``降息`` / ``加息``.
"""

from __future__ import annotations

from datetime import date

import pytest

from headwise.demo.corpus import generate_demo_corpus
from headwise.slots import REFERENCE_DATES, normalize_slot


def cny(value: float) -> dict:
    return {"amount": value, "currency": "CNY"}


SPANS = [
    # -- amounts: 万 / 千 / k / w, ￥ / 元 / 块 / RMB, full-width digits --------------------
    ("amount", "1.5万", cny(15000.0)),
    ("amount", "一万二", cny(12000.0)),  # 一万二千, the 千 left out
    ("amount", "一万五", cny(15000.0)),
    ("amount", "1万2", cny(12000.0)),
    ("amount", "3千5", cny(3500.0)),
    ("amount", "两千五百元", cny(2500.0)),
    ("amount", "一千二", cny(1200.0)),
    ("amount", "一千二百块", cny(1200.0)),
    ("amount", "一万零五百元", cny(10500.0)),
    ("amount", "八百八十八元", cny(888.0)),
    ("amount", "三千五百块钱", cny(3500.0)),
    ("amount", "0.5万", cny(5000.0)),
    ("amount", "2.5万元", cny(25000.0)),
    ("amount", "1.2万块", cny(12000.0)),
    ("amount", "三十万元", cny(300000.0)),
    ("amount", "一百万", cny(1000000.0)),
    ("amount", "5千块", cny(5000.0)),
    ("amount", "3k", cny(3000.0)),
    ("amount", "3K", cny(3000.0)),
    ("amount", "1.5k", cny(1500.0)),
    ("amount", "5k块", cny(5000.0)),
    ("amount", "2w", cny(20000.0)),
    ("amount", "1.5w", cny(15000.0)),
    ("amount", "10W", cny(100000.0)),
    ("amount", "2w块", cny(20000.0)),
    ("amount", "¥1,200.50", cny(1200.5)),
    ("amount", "￥8000", cny(8000.0)),
    ("amount", "￥ 500", cny(500.0)),
    ("amount", "１２００元", cny(1200.0)),
    ("amount", "￥１，２００", cny(1200.0)),
    ("amount", "RMB 3000", cny(3000.0)),
    ("amount", "3000 RMB", cny(3000.0)),
    ("amount", "rmb3,000", cny(3000.0)),
    ("amount", "CNY 500", cny(500.0)),
    ("amount", "人民币三千元", cny(3000.0)),
    ("amount", "5000元整", cny(5000.0)),
    ("amount", "两块五", cny(2.5)),
    ("amount", "五毛", cny(0.5)),
    ("amount", "3000 yuan", cny(3000.0)),
    ("amount", "two thousand yuan", cny(2000.0)),
    ("amount", "$1,200.50", {"amount": 1200.5, "currency": "USD"}),
    ("amount", "2w欧元", {"amount": 20000.0, "currency": "EUR"}),
    # -- dates (reference Thursday 2026-01-15) ------------------------------------------------
    ("date", "2026年3月5日", "2026-03-05"),
    ("date", "二〇二六年三月五日", "2026-03-05"),
    ("date", "今年3月5日", "2026-03-05"),
    ("date", "3月5号", "2026-03-05"),
    ("date", "3月5", "2026-03-05"),
    ("date", "三月五日", "2026-03-05"),
    ("date", "３月５日", "2026-03-05"),
    ("date", "下个月5号", "2026-02-05"),
    ("date", "下月5号", "2026-02-05"),
    ("date", "5号", "2026-02-05"),  # the next 5th after the 15th
    ("date", "明天", "2026-01-16"),
    ("date", "后天", "2026-01-17"),
    ("date", "大后天", "2026-01-18"),
    ("date", "前天", "2026-01-13"),
    ("date", "两天后", "2026-01-17"),
    ("date", "一周后", "2026-01-22"),
    ("date", "月底", "2026-01-31"),
    ("date", "下周五", "2026-01-23"),
    ("date", "下礼拜一", "2026-01-19"),
    ("date", "下下周一", "2026-01-26"),
    ("date", "礼拜五", "2026-01-16"),
    ("date", "2026-03-05", "2026-03-05"),
    ("date", "2026/3/5", "2026-03-05"),
    ("date", "2026.03.05", "2026-03-05"),
    ("date", "3/15", "2026-03-15"),  # only March 15: there is no month 15
    ("date", "15/3", "2026-03-15"),
    ("date", "15/03/2026", "2026-03-15"),
    ("date", "March 5th", "2026-03-05"),
    ("date", "5th March", "2026-03-05"),
    ("date", "Mar. 5", "2026-03-05"),
    ("date", "5 March 2026", "2026-03-05"),
    ("date", "January 20, 2026", "2026-01-20"),
    ("date", "Jan 20th", "2026-01-20"),
    ("date", "the 5th of next month", "2026-02-05"),
    ("date", "next Friday", "2026-01-23"),  # the Friday of next week, not tomorrow
    ("date", "next Monday", "2026-01-19"),
    ("date", "this Friday", "2026-01-16"),
    ("date", "five days from now", "2026-01-20"),
    # -- ordinals -----------------------------------------------------------------------------
    ("ordinal", "第三期", 3),
    ("ordinal", "第3期", 3),
    ("ordinal", "第 3 期", 3),
    ("ordinal", "第１２期", 12),
    ("ordinal", "第二个月", 2),
    ("ordinal", "the 2nd installment", 2),
    ("ordinal", "second installment", 2),
    ("ordinal", "the first installment", 1),
    ("ordinal", "the 10th instalment", 10),
    ("ordinal", "the 3rd payment", 3),
    ("ordinal", "installment 3", 3),
    # -- rates and percentages ----------------------------------------------------------------
    ("rate_percent", "年化3.5%", 3.5),
    ("rate_percent", "年利率4.35%", 4.35),
    ("rate_percent", "年化收益率3.2%", 3.2),
    ("rate_percent", "百分之五", 5.0),
    ("rate_percent", "百分之十二", 12.0),
    ("rate_percent", "年化百分之四", 4.0),
    ("rate_percent", "利率5%", 5.0),
    ("rate_percent", "5%年化", 5.0),
    ("rate_percent", "０.５％", 0.5),
    ("rate_percent", "5 percent", 5.0),
    ("rate_percent", "3.5 per cent", 3.5),
    ("rate_percent", "APR 19.9%", 19.9),
    ("rate_spread_bp", "50个基点", 50),
    ("rate_spread_bp", "五十个基点", 50),
    ("rate_spread_bp", "加50个基点", 50),
    ("rate_spread_bp", "LPR+50bp", 50),
    ("rate_spread_bp", "LPR加50BP", 50),
    ("rate_spread_bp", "50 basis points", 50),
    ("rate_spread_bp", "50bps", 50),
    ("rate_change_bp", "下调50bp", -50),
    ("rate_change_bp", "降息25个基点", -25),
    ("rate_change_bp", "加息25个基点", 25),
    ("rate_change_bp", "LPR降息10个基点", -10),
    ("rate_change_bp", "利率下调了0.25个百分点", -25),
    ("rate_change_bp", "下降0.5个百分点", -50),
    ("rate_change_bp", "上调25bps", 25),
    ("rate_change_bp", "rise of 25 basis points", 25),
    ("rate_change_bp", "cut of 50 bps", -50),
    # -- terms and card tails -----------------------------------------------------------------
    ("duration_months", "分12期", 12),
    ("duration_months", "3年", 36),
    ("duration_months", "18 months", 18),
    ("duration_months", "six months", 6),
    ("duration_months", "12 installments", 12),
    ("card_tail", "尾号 1234", "1234"),
    ("card_tail", "尾号１２３４", "1234"),
    ("card_tail", "末四位5678", "5678"),
    ("card_tail", "尾号幺二三四", "1234"),
    ("card_tail", "ending 4321", "4321"),
]


@pytest.mark.parametrize(("name", "text", "expected"), SPANS,
                         ids=[f"{n}:{t}" for n, t, _ in SPANS])
def test_hand_written_span(name, text, expected):
    got = normalize_slot(name, text)
    assert got == expected
    assert type(got) is type(expected)


def test_the_spans_are_many_and_mostly_ones_the_generator_never_writes():
    assert REFERENCE_DATES["demo"] == date(2026, 1, 15)  # the dates above assume it
    generated = {slot.text for split in generate_demo_corpus(seed=0).values()
                 for ex in split for slot in ex.slots}
    unseen = [t for _, t, _ in SPANS if t not in generated]
    assert len(SPANS) == len({(n, t) for n, t, _ in SPANS})
    assert len(unseen) >= 100, len(unseen)
    assert {n for n, _, _ in SPANS} == {"amount", "date", "ordinal", "rate_percent",
                                        "rate_spread_bp", "rate_change_bp",
                                        "duration_months", "card_tail"}


@pytest.mark.parametrize(("reference", "text", "expected"), [
    (date(2026, 3, 2), "next Friday", "2026-03-13"),  # a Monday: the Friday of next week
    (date(2026, 3, 2), "下周五", "2026-03-13"),
    (date(2026, 3, 6), "next Friday", "2026-03-13"),  # a Friday: a week on
    (date(2026, 3, 6), "明天", "2026-03-07"),
    (date(2026, 12, 20), "下个月5号", "2027-01-05"),
    (date(2026, 12, 31), "后天", "2027-01-02"),
    (date(2028, 2, 28), "明天", "2028-02-29"),  # a leap year
    (date(2026, 3, 2), "3/15", "2026-03-15"),
])
def test_relative_dates_against_a_given_reference(reference, text, expected):
    assert normalize_slot("date", text, reference=reference) == expected


def test_nlupp_reads_a_month_before_its_reference_as_next_years():
    # NLU++'s today is 2022-03-15; January comes round again in 2023, as "Jan the 19th" does
    assert normalize_slot("date", "1/19", schema="nlupp") == {"day": 19, "month": 1,
                                                              "year": 2023}
    assert normalize_slot("date", "3/20", schema="nlupp") == {"day": 20, "month": 3,
                                                              "year": 2022}


@pytest.mark.parametrize(("name", "text", "message"), [
    # both orders read a day: 3 May or 5 March; the text alone cannot say which
    ("date", "3/5", "ambiguous"),
    ("date", "05/03/2026", "ambiguous"),
    ("date", "13/13", "neither number is a month"),
    ("date", "2/30", "no day 2026-02-30"),
])
def test_spans_that_say_too_little_or_nothing_are_refused(name, text, message):
    with pytest.raises(ValueError, match=message):
        normalize_slot(name, text)
