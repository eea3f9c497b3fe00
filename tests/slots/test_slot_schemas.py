"""Slot schemas as data (headwise.slots.schema): the built-in files reproduce the values
the corpora annotate, a team's own schema is read, checked and used by normalize_slot and
the compound classifier, and a bad one is refused with a message naming the slot."""

from __future__ import annotations

import json
from datetime import date

import pytest

from headwise.slots import (
    SCHEMAS,
    SlotSchema,
    load_schema,
    normalize_slot,
    register_schema,
    unregister_schema,
)
from headwise.slots.converters import CONVERTERS

MYBANK = {"name": "mybank", "reference_date": "2026-06-01",
          "description": "transfers and cards, Hong Kong",
          "slots": {"transfer_amount": {"converter": "amount", "default_currency": "HKD"},
                    "due_date": "iso_date", "card": "card_tail", "months": "duration_months"}}


@pytest.fixture
def mybank():
    schema = register_schema(MYBANK)
    yield schema
    unregister_schema("mybank")


def test_the_built_in_schemas_are_data_files_that_round_trip():
    assert list(SCHEMAS)[:2] == ["demo", "nlupp"]
    for name in ("demo", "nlupp"):
        schema = SCHEMAS[name]
        assert load_schema(schema.to_dict()).to_dict() == schema.to_dict()
        assert all(rule.converter in CONVERTERS for rule in schema.rules.values())
    assert SCHEMAS["demo"].reference_date == date(2026, 1, 15)
    assert SCHEMAS["nlupp"].rules["date_to"].options == {"end": True}
    # the same text, two schemas' conventions (hand-checked values)
    assert normalize_slot("amount", "3500元") == {"amount": 3500.0, "currency": "CNY"}
    assert normalize_slot("amount_of_money", "73") == {"amount": 73.0, "currency": "ambiguous"}
    assert normalize_slot("date_from", "from 3 to 5 May") == {"day": 3, "month": 5, "year": 2022}
    assert normalize_slot("date_to", "from 3 to 5 May") == {"day": 5, "month": 5, "year": 2022}


def test_a_teams_schema_is_used_by_name_and_as_an_object(mybank, tmp_path):
    assert normalize_slot("transfer_amount", "2千", schema="mybank") == {
        "amount": 2000.0, "currency": "HKD"}
    assert normalize_slot("due_date", "明天", schema="mybank") == "2026-06-02"
    assert normalize_slot("card", "尾号一二三四") == "1234"  # found without naming it
    assert normalize_slot("due_date", "明天", schema="mybank",
                          reference=date(2026, 1, 1)) == "2026-01-02"
    path = tmp_path / "mybank.json"
    path.write_text(json.dumps(MYBANK), encoding="utf-8")
    from_file = load_schema(path)
    assert from_file.to_dict() == mybank.to_dict()
    assert normalize_slot("months", "一年半", schema=from_file) == 18
    with pytest.raises(ValueError, match="a schema 'mybank' is registered"):
        register_schema(path)
    assert register_schema(path, replace=True).name == "mybank"


def test_a_schema_without_a_reference_date_resolves_against_today():
    schema = SlotSchema("today", {"when": "iso_date"})
    assert schema.reference() == date.today()
    assert normalize_slot("when", "明天", schema=schema) == date.fromordinal(
        date.today().toordinal() + 1).isoformat()


@pytest.mark.parametrize("data, message", [
    ({"name": "x", "slots": {"a": "no_such"}}, r"slot 'a' names converter 'no_such'; known: "),
    ({"name": "x", "slots": {"a": {"converter": "amount", "currency": "HKD"}}},
     "converter 'amount' takes default_currency, not currency"),
    ({"name": "x", "slots": {"a": {"converter": "ordinal", "end": True}}},
     "converter 'ordinal' takes no options, not end"),
    ({"name": "x", "slots": {"a": 3}}, "needs a converter name or an object"),
    ({"name": "x", "slots": {}}, "has no slots"),
    ({"name": "", "slots": {"a": "ordinal"}}, "needs a name"),
    ({"name": "x", "slots": ["a"]}, "must be an object"),
    ({"name": "x", "reference_date": "soon", "slots": {"a": "ordinal"}},
     "reference_date must be an ISO date"),
    ({"name": "x", "slot": {"a": "ordinal"}}, r"unknown keys \['slot'\]"),
    (["x"], "a slot schema is a JSON object"),
])
def test_bad_schemas_are_refused_naming_what_is_wrong(data, message):
    with pytest.raises(ValueError, match=message):
        load_schema(data)


def test_bad_files_and_registrations(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="bad.json: not JSON"):
        load_schema(bad)
    with pytest.raises(FileNotFoundError):
        load_schema(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="'demo' is a built-in schema"):
        register_schema({"name": "demo", "slots": {"a": "ordinal"}})
    with pytest.raises(KeyError, match="no registered schema 'nlupp'"):
        unregister_schema("nlupp")
    with pytest.raises(ValueError, match="unknown schema 'nope'; known: demo, nlupp"):
        normalize_slot("date", "明天", schema="nope")


def test_the_compound_classifier_normalises_a_registered_schemas_slots():
    from headwise.intent.compound.classifier import CompoundClassifier
    from headwise.text.dataset import SlotSpan

    spans = [SlotSpan("transfer_amount", 2, 4, "2千"), SlotSpan("card", 8, 14, "尾号9x12"),
             SlotSpan("note", 15, 17, "加急")]
    day = date(2026, 6, 1)
    before = CompoundClassifier.resolve_slots(spans, day)
    assert [(s.name, s.value) for s in before] == [  # no schema knows them: kept, no value
        ("transfer_amount", None), ("card", None), ("note", None)]
    register_schema(MYBANK)
    try:
        after = CompoundClassifier.resolve_slots(spans, day)
    finally:
        unregister_schema("mybank")
    # the known slot gets its value; the card text does not parse: a tagging error, left out
    assert [(s.name, s.value) for s in after] == [
        ("transfer_amount", {"amount": 2000.0, "currency": "HKD"}), ("note", None)]
