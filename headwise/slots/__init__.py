"""Slot values: the text of a slot to a normalised value, in Chinese and English, and the
slot schemas (data) that say which slot takes which kind of value.

::

    from headwise.slots import normalize_slot, normalize_value, to_json

    normalize_value("amount", "两千零五元")          # Amount(2005.0, "CNY")
    normalize_value("rate", "下调25个基点")          # Rate(-0.25, -25.0, change=True)
    normalize_value("ordinal", "the 21st instalment")   # 21
    normalize_value("duration", "a year and a half")    # 18 (months)
    normalize_value("date", "next Friday", reference=date(2026, 1, 15))   # "2026-01-23"
    normalize_slot("amount", "1.5万")               # {"amount": 15000.0, "currency": "CNY"}

One concept per module: :mod:`~headwise.slots.numbers` (numbers any way written),
:mod:`~headwise.slots.english_numerals`, :mod:`~headwise.slots.amount`,
:mod:`~headwise.slots.rate`, :mod:`~headwise.slots.ordinal`,
:mod:`~headwise.slots.duration`, :mod:`~headwise.slots.periods` (calendar
arithmetic and the week conventions), :mod:`~headwise.slots.dates_zh`,
:mod:`~headwise.slots.dates_en`, :mod:`~headwise.slots.dates` (ranges),
:mod:`~headwise.slots.time_of_day`, :mod:`~headwise.slots.normalize` (the entry
point), :mod:`~headwise.slots.converters` (the slot converters schemas name),
:mod:`~headwise.slots.schema` (schemas as data: :func:`load_schema`,
:func:`register_schema`) and :mod:`~headwise.slots.slot_values` (:func:`normalize_slot`).
"""

from headwise.slots.amount import Amount, parse_amount
from headwise.slots.dates import parse_date
from headwise.slots.duration import parse_duration_days, parse_duration_months
from headwise.slots.normalize import KINDS, normalize_value, to_json
from headwise.slots.numbers import parse_number
from headwise.slots.ordinal import parse_ordinal
from headwise.slots.periods import DateRange
from headwise.slots.rate import Rate, parse_rate
from headwise.slots.schema import (
    REFERENCE_DATES,
    SCHEMAS,
    SlotRule,
    SlotSchema,
    load_schema,
    register_schema,
    unregister_schema,
)
from headwise.slots.slot_values import normalize_slot
from headwise.slots.time_of_day import TimeOfDay, parse_time

__all__ = ["KINDS", "REFERENCE_DATES", "SCHEMAS", "Amount", "DateRange", "Rate", "SlotRule",
           "SlotSchema", "TimeOfDay", "load_schema", "normalize_slot", "normalize_value",
           "parse_amount", "parse_date", "parse_duration_days", "parse_duration_months",
           "parse_number", "parse_ordinal", "parse_rate", "parse_time", "register_schema",
           "to_json", "unregister_schema"]
