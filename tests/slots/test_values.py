"""Value normalisation: a hand-written table of Chinese and English slot texts and their values.

Every expected value below is written by hand, not produced by the code under test. Dates
resolve against Thursday 2026-01-15 (the demo corpus's "today") unless a case says otherwise.
"""

from __future__ import annotations

import json
from datetime import date

import pytest

from headwise.slots import (
    KINDS,
    Amount,
    DateRange,
    Rate,
    TimeOfDay,
    normalize_value,
    parse_date,
    to_json,
)
from headwise.text.chinese_numerals import chinese_numeral, parse_chinese_numeral, parse_numeral

REF = date(2026, 1, 15)  # a Thursday

CASES = [
    # -- amounts ------------------------------------------------------------------------------
    ("amount", "三千五百元", Amount(3500.0, "CNY")),
    ("amount", "两千零五", Amount(2005.0, None)),
    ("amount", "两千零五元", Amount(2005.0, "CNY")),
    ("amount", "两千五", Amount(2500.0, None)),
    ("amount", "1.5万", Amount(15000.0, None)),
    ("amount", "3万5", Amount(35000.0, None)),
    ("amount", "三万五千块", Amount(35000.0, "CNY")),
    ("amount", "¥3,500", Amount(3500.0, "CNY")),
    ("amount", "￥3,500", Amount(3500.0, "CNY")),
    ("amount", "3,500.00元", Amount(3500.0, "CNY")),
    ("amount", "两万块", Amount(20000.0, "CNY")),
    ("amount", "110块钱", Amount(110.0, "CNY")),
    ("amount", "100万元", Amount(1000000.0, "CNY")),
    ("amount", "三块五", Amount(3.5, "CNY")),
    ("amount", "12元3角4分", Amount(12.34, "CNY")),
    ("amount", "五百美元", Amount(500.0, "USD")),
    ("amount", "200英镑", Amount(200.0, "GBP")),
    ("amount", "$20", Amount(20.0, "USD")),
    ("amount", "£50", Amount(50.0, "GBP")),
    ("amount", "40€", Amount(40.0, "EUR")),
    ("amount", "20 pounds", Amount(20.0, "GBP")),
    ("amount", "EUR 1,200", Amount(1200.0, "EUR")),
    ("amount", "67.27 euros", Amount(67.27, "EUR")),
    ("amount", "3.5k", Amount(3500.0, None)),
    ("amount", "a grand", Amount(1000.0, None)),
    ("amount", "two grand", Amount(2000.0, None)),
    ("amount", "five hundred dollars", Amount(500.0, "USD")),
    ("amount", "twenty-five", Amount(25.0, None)),
    ("amount", "1.2m", Amount(1200000.0, None)),
    ("amount", "a thousand pounds", Amount(1000.0, "GBP")),
    ("amount", "five dollars and fifty cents", Amount(5.5, "USD")),
    ("amount", "  ３５００元 ", Amount(3500.0, "CNY")),
    # -- rates --------------------------------------------------------------------------------
    ("rate", "3.85%", Rate(3.85, 385.0, False)),
    ("rate", "百分之三点八五", Rate(3.85, 385.0, False)),
    ("rate", "百分之四点九", Rate(4.9, 490.0, False)),
    ("rate", "LPR 下调 25 个基点", Rate(-0.25, -25.0, True, "LPR")),
    ("rate", "下调25个基点", Rate(-0.25, -25.0, True)),
    ("rate", "下调了十BP", Rate(-0.1, -10.0, True)),
    ("rate", "上调10bp", Rate(0.1, 10.0, True)),
    ("rate", "上调二十五个基点", Rate(0.25, 25.0, True)),
    ("rate", "up 15 basis points", Rate(0.15, 15.0, True)),
    ("rate", "cut by 0.25 percentage points", Rate(-0.25, -25.0, True)),
    ("rate", "a 25bp cut", Rate(-0.25, -25.0, True)),
    ("rate", "LPR加55个基点", Rate(0.55, 55.0, False, "LPR")),
    ("rate", "LPR减20个基点", Rate(-0.2, -20.0, False, "LPR")),
    ("rate", "55bp over LPR", Rate(0.55, 55.0, False, "LPR")),
    ("rate", "55个基点", Rate(0.55, 55.0, False)),
    ("rate", "下调至3.5%", Rate(3.5, 350.0, False)),
    ("rate", "cut to 3.5%", Rate(3.5, 350.0, False)),
    # -- ordinals -----------------------------------------------------------------------------
    ("ordinal", "第三期", 3),
    ("ordinal", "第12期", 12),
    ("ordinal", "第二十一期", 21),
    ("ordinal", "第3个月", 3),
    ("ordinal", "third", 3),
    ("ordinal", "3rd", 3),
    ("ordinal", "the 21st instalment", 21),
    ("ordinal", "twenty-first", 21),
    ("ordinal", "the twelfth payment", 12),
    ("ordinal", "instalment no. 4", 4),
    # -- durations (months) -------------------------------------------------------------------
    ("duration", "12期", 12),
    ("duration", "二十四期", 24),
    ("duration", "24个月", 24),
    ("duration", "两年", 24),
    ("duration", "一年半", 18),
    ("duration", "半年", 6),
    ("duration", "分36期", 36),
    ("duration", "6 months", 6),
    ("duration", "two years", 24),
    ("duration", "a year and a half", 18),
    ("duration", "one and a half years", 18),
    ("duration", "1.5 years", 18),
    ("duration", "a year", 12),
    # -- numbers ------------------------------------------------------------------------------
    ("number", "6", 6),
    ("number", "six", 6),
    ("number", "十二", 12),
    ("number", "两千零五", 2005),
    ("number", "1.5万", 15000),
    ("number", "三点八五", 3.85),
    ("number", "二〇二六", 2026),
    ("number", "twenty-five", 25),
    ("number", "one thousand two hundred and fifty", 1250),
    ("number", "3,500.00", 3500),
    # -- dates (reference Thursday 2026-01-15) ------------------------------------------------
    ("date", "3月15日", "2026-03-15"),
    ("date", "三月十五号", "2026-03-15"),
    ("date", "下个月5号", "2026-02-05"),
    ("date", "上个月20号", "2025-12-20"),
    ("date", "明天", "2026-01-16"),
    ("date", "后天", "2026-01-17"),
    ("date", "昨天", "2026-01-14"),
    ("date", "上周五", "2026-01-09"),
    ("date", "上周三", "2026-01-07"),
    ("date", "下周一", "2026-01-19"),
    ("date", "这周三", "2026-01-14"),
    ("date", "周五", "2026-01-16"),
    ("date", "星期四", "2026-01-22"),
    ("date", "每月10号", "R/2026-02-10/P1M"),
    ("date", "每个月20日", "R/2026-01-20/P1M"),
    ("date", "每月15号", "R/2026-01-15/P1M"),
    ("date", "每周五", "R/2026-01-16/P1W"),
    ("date", "10号", "2026-02-10"),
    ("date", "2026年3月5日", "2026-03-05"),
    ("date", "明年3月1日", "2027-03-01"),
    ("date", "3天后", "2026-01-18"),
    ("date", "下个月底", "2026-02-28"),
    ("date", "下周", DateRange("2026-01-19", "2026-01-25")),
    ("date", "下个月", DateRange("2026-02-01", "2026-02-28")),
    ("date", "本季度", DateRange("2026-01-01", "2026-03-31")),
    ("date", "最近3天", DateRange("2026-01-12", "2026-01-15")),
    ("date", "next Friday", "2026-01-23"),
    ("date", "Friday", "2026-01-16"),
    ("date", "this Monday", "2026-01-12"),
    ("date", "last Monday", "2026-01-12"),
    ("date", "last Friday", "2026-01-09"),
    ("date", "last Wednesday", "2026-01-14"),
    ("date", "tomorrow", "2026-01-16"),
    ("date", "the day after tomorrow", "2026-01-17"),
    ("date", "yesterday", "2026-01-14"),
    ("date", "March 3", "2026-03-03"),
    ("date", "3rd of March", "2026-03-03"),
    ("date", "March the 3rd, 2027", "2027-03-03"),
    ("date", "2026-03-05", "2026-03-05"),
    ("date", "in 3 days", "2026-01-18"),
    ("date", "2 weeks ago", "2026-01-01"),
    ("date", "the 5th", "2026-02-05"),
    ("date", "end of the month", "2026-01-31"),
    ("date", "the 10th of every month", "R/2026-02-10/P1M"),
    ("date", "next week", DateRange("2026-01-19", "2026-01-25")),
    ("date", "last week", DateRange("2026-01-05", "2026-01-11")),
    ("date", "this weekend", DateRange("2026-01-17", "2026-01-18")),
    ("date", "next month", DateRange("2026-02-01", "2026-02-28")),
    ("date", "March", DateRange("2026-03-01", "2026-03-31")),
    ("date", "the next 2 weeks", DateRange("2026-01-16", "2026-01-29")),
    ("date", "last quarter", DateRange("2025-10-01", "2025-12-31")),
    ("date", "between March 3 and 5", DateRange("2026-03-03", "2026-03-05")),
    ("date", "from 3月1日到3月5日", DateRange("2026-03-01", "2026-03-05")),
    ("date", "3月1日至5日", DateRange("2026-03-01", "2026-03-05")),
    ("date", "from the 3rd to the 5th of March", DateRange("2026-03-03", "2026-03-05")),
    # -- times of day -------------------------------------------------------------------------
    ("time", "9 05 in the morning", TimeOfDay(9, 5)),
    ("time", "25 to 7 p.m.", TimeOfDay(18, 35)),
    ("time", "half past 3", TimeOfDay(3, 30)),
    ("time", "quarter to 4 pm", TimeOfDay(15, 45)),
    ("time", "12:30 a.m.", TimeOfDay(0, 30)),
    ("time", "10 past 9 night", TimeOfDay(21, 10)),
    ("time", "下午3点半", TimeOfDay(15, 30)),
    ("time", "晚上8点15分", TimeOfDay(20, 15)),
]


@pytest.mark.parametrize(("kind", "text", "expected"), CASES,
                         ids=[f"{k}:{t}" for k, t, _ in CASES])
def test_hand_written_value(kind, text, expected):
    got = normalize_value(kind, text, reference=REF)
    assert got == expected
    assert type(got) is type(expected)


def test_the_table_is_large_and_covers_every_kind():
    assert len(CASES) >= 80
    assert {kind for kind, _, _ in CASES} == set(KINDS)
    assert sum(any("\u4e00" <= ch <= "\u9fff" for ch in t) for _, t, _ in CASES) >= 40


@pytest.mark.parametrize(("reference", "expected"), [
    (date(2026, 1, 15), "2026-01-23"),  # Thursday: not tomorrow, next week's Friday
    (date(2026, 1, 16), "2026-01-23"),  # Friday: a week on
    (date(2026, 1, 18), "2026-01-23"),  # Sunday: next week starts tomorrow
    (date(2026, 1, 19), "2026-01-30"),  # Monday
])
def test_next_friday_is_the_friday_of_next_week(reference, expected):
    assert normalize_value("date", "next Friday", reference=reference) == expected
    assert normalize_value("date", "下周五", reference=reference) == expected


def test_this_last_and_bare_weekdays_around_a_sunday():
    sunday = date(2026, 1, 18)
    assert normalize_value("date", "this Friday", reference=sunday) == "2026-01-16"
    assert normalize_value("date", "Friday", reference=sunday) == "2026-01-23"
    assert normalize_value("date", "last Friday", reference=sunday) == "2026-01-16"
    assert normalize_value("date", "上周五", reference=sunday) == "2026-01-09"
    assert normalize_value("date", "next week", reference=sunday) == DateRange(
        "2026-01-19", "2026-01-25")


def test_relative_dates_follow_the_reference():
    assert normalize_value("date", "明天", reference=date(2024, 2, 28)) == "2024-02-29"
    assert normalize_value("date", "每月10号", reference=date(2026, 12, 20)) == \
        "R/2027-01-10/P1M"
    assert normalize_value("date", "下个月", reference=date(2024, 1, 31)) == DateRange(
        "2024-02-01", "2024-02-29")


def test_month_shifts_clamp_but_named_days_do_not():
    jan31 = date(2026, 1, 31)
    assert normalize_value("date", "in a month", reference=jan31) == "2026-02-28"
    assert normalize_value("date", "1个月后", reference=jan31) == "2026-02-28"
    with pytest.raises(ValueError, match="no day 2026-02-31"):
        normalize_value("date", "下个月31号", reference=jan31)


def test_months_ahead_moves_earlier_months_to_next_year():
    march = date(2022, 3, 15)
    assert parse_date("January 19", march) == "2022-01-19"
    assert parse_date("January 19", march, months_ahead=True) == "2023-01-19"
    assert parse_date("1月19日", march, months_ahead=True) == "2023-01-19"
    assert parse_date("March 6", march, months_ahead=True) == "2022-03-06"
    assert parse_date("January 19 2021", march, months_ahead=True) == "2021-01-19"


def test_today_is_the_default_reference():
    assert normalize_value("date", "今天") == date.today().isoformat()


ERRORS = [
    ("amount", "abc", "not an amount"),
    ("amount", "$20 euros", "two currencies"),
    ("amount", "元", "no number"),
    ("rate", "3.85", "no rate"),
    ("rate", "上调下调25bp", "both up and down"),
    ("rate", "fish 25bp", "says nothing about a rate"),
    ("ordinal", "3th", "3rd"),
    ("ordinal", "第零期", "counted from 1"),
    ("ordinal", "last", "not an ordinal"),
    ("duration", "3 weeks", "not a duration"),
    ("duration", "一个半月", "whole number of months"),
    ("duration", "1.3 years", "whole number of months"),
    ("number", "five twenty", "not a number"),
    ("number", "3五", "two numbers without a unit"),
    ("date", "2月30日", "no day 2026-02-30"),
    ("date", "下个月31号", "no day 2026-02-31"),
    ("date", "13月1日", "no month 13"),
    ("date", "05/03/2026", "ambiguous"),
    ("date", "March 5 to March 3", "before it starts"),
    ("date", "between March 3", "without its end"),
    ("date", "every Friday to March 5", "recurrence"),
    ("date", "blah", "not a date"),
    ("time", "25:00", "not a time of day"),
    ("time", "half past", "not a time of day"),
    ("colour", "red", "unknown kind"),
    ("amount", "   ", "empty"),
]


@pytest.mark.parametrize(("kind", "text", "message"), ERRORS,
                         ids=[f"{k}:{t}" for k, t, _ in ERRORS])
def test_text_that_does_not_parse_is_a_clear_error(kind, text, message):
    with pytest.raises(ValueError, match=message):
        normalize_value(kind, text, reference=REF)


def test_to_json_gives_plain_json():
    values = [normalize_value("amount", "两万块"), normalize_value("rate", "LPR加55个基点"),
              normalize_value("date", "next week", reference=REF),
              normalize_value("time", "half past 3"), normalize_value("ordinal", "第三期"),
              normalize_value("amount", "a grand"), date(2026, 3, 5)]
    assert [to_json(v) for v in values] == [
        {"amount": 20000.0, "currency": "CNY"},
        {"percent": 0.55, "basis_points": 55.0, "change": False, "base": "LPR"},
        {"start": "2026-01-19", "end": "2026-01-25"},
        {"hour": 3, "minute": 30}, 3, {"amount": 1000.0, "currency": None}, "2026-03-05"]
    json.dumps([to_json(v) for v in values])
    with pytest.raises(TypeError):
        to_json(object())


def test_rate_holds_one_quantity_in_two_units():
    for text in ("3.85%", "下调25个基点", "cut by 0.25 percentage points", "上调二十五BP"):
        rate = normalize_value("rate", text)
        assert rate.basis_points == pytest.approx(100 * rate.percent)


def test_parse_numeral_reads_mixed_and_spoken_forms():
    assert [parse_numeral(t) for t in ("1.5万", "3万5", "12万3千", "一点五万", "十万零五",
                                       "一亿五千万", "负五", "点五")] == [
        15000, 35000, 123000, 15000, 100005, 150000000, -5, 0.5]
    spoken = ("两千五", "三万五", "一百五", "两千零五", "十五")
    assert [parse_chinese_numeral(t) for t in spoken] == [2500, 35000, 150, 2005, 15]
    # the elision never changes what chinese_numeral writes
    assert all(parse_chinese_numeral(chinese_numeral(n, liang=liang)) == n
               for n in range(0, 10**8, 9973) for liang in (False, True))
    for bad in ("百百", "3五", "abc", ""):
        with pytest.raises(ValueError):
            parse_numeral(bad)
