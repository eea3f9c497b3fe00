"""Value normalisation: the text of a slot to a normalised value, in Chinese and English.

::

    from headwise.text.values import normalize_slot, normalize_value, to_json

    normalize_value("amount", "两千零五元")          # Amount(2005.0, "CNY")
    normalize_value("rate", "下调25个基点")          # Rate(-0.25, -25.0, change=True)
    normalize_value("ordinal", "the 21st instalment")   # 21
    normalize_value("duration", "a year and a half")    # 18 (months)
    normalize_value("date", "next Friday", reference=date(2026, 1, 15))   # "2026-01-23"
    normalize_slot("amount", "1.5万")               # {"amount": 15000.0, "currency": "CNY"}

One concept per module: :mod:`~headwise.text.values.numbers` (numbers any way written),
:mod:`~headwise.text.values.english_numerals`, :mod:`~headwise.text.values.amount`,
:mod:`~headwise.text.values.rate`, :mod:`~headwise.text.values.ordinal`,
:mod:`~headwise.text.values.duration`, :mod:`~headwise.text.values.periods` (calendar
arithmetic and the week conventions), :mod:`~headwise.text.values.dates_zh`,
:mod:`~headwise.text.values.dates_en`, :mod:`~headwise.text.values.dates` (ranges),
:mod:`~headwise.text.values.time_of_day`, :mod:`~headwise.text.values.normalize` (the entry
point) and :mod:`~headwise.text.values.slots` (slot names and corpus formats).
"""

from headwise.text.values.amount import Amount, parse_amount
from headwise.text.values.dates import parse_date
from headwise.text.values.duration import parse_duration_days, parse_duration_months
from headwise.text.values.normalize import KINDS, normalize_value, to_json
from headwise.text.values.numbers import parse_number
from headwise.text.values.ordinal import parse_ordinal
from headwise.text.values.periods import DateRange
from headwise.text.values.rate import Rate, parse_rate
from headwise.text.values.slots import REFERENCE_DATES, SCHEMAS, normalize_slot
from headwise.text.values.time_of_day import TimeOfDay, parse_time

__all__ = ["KINDS", "REFERENCE_DATES", "SCHEMAS", "Amount", "DateRange", "Rate", "TimeOfDay",
           "normalize_slot", "normalize_value", "parse_amount", "parse_date",
           "parse_duration_days", "parse_duration_months", "parse_number", "parse_ordinal",
           "parse_rate", "parse_time", "to_json"]
