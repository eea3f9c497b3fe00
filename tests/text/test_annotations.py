"""Annotated (multi-intent + slot) readers: NLU++ and demo layouts, line-numbered errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from headwise.text.annotations import looks_multi_label, read_annotated, read_nlupp
from headwise.text.dataset import Dataset, Example, SlotSpan
from headwise.text.readers import DataError

# hand-written rows in the NLU++ layout (a pretty-printed JSON array)
NLUPP = """[
  {
    "text": "How much is a transfer of £1,200?",
    "intents": ["how_much", "fees", "transfer"],
    "slots": {
      "amount_of_money": {"text": "£1,200", "span": [26, 32], "value": 1200}
    }
  },
  {
    "text": "next week",
    "slots": {
      "date_period": {"text": "next week", "span": [0, 9],
                      "values": {"from": {"day": 4}, "to": {"day": 10}}}
    }
  },
  {"text": "cancel it", "intents": ["cancel"]},
  {
    "text": "Pay 50 on 3 May from 9 am",
    "intents": ["make_open_apply_setup_get_activate"],
    "slots": {
      "time_from": {"text": "9 am", "span": [21, 25], "value": {"hour": 9}},
      "amount_of_money": {"text": "50", "span": [4, 6], "value": 50},
      "date": {"text": "3 May", "span": [10, 15], "value": {"day": 3, "month": 5}}
    }
  }
]
"""


def write(tmp_path, name: str, content: str | bytes):
    path = tmp_path / name
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def jsonl(rows: list[object]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def test_nlupp_array_layout_lines_values_and_slot_order(tmp_path):
    ds = read_annotated(write(tmp_path, "fold0.json", NLUPP))
    assert isinstance(ds, Dataset) and len(ds) == 4 and ds.skipped == []
    first, second, third, fourth = ds
    assert first == Example(
        "How much is a transfer of £1,200?", ("how_much", "fees", "transfer"),
        (SlotSpan("amount_of_money", 26, 32, "£1,200", 1200),), 2)
    # a row without intents has none; "values" is read like "value"
    assert second.intents == () and second.line == 9
    assert second.slots[0].value == {"from": {"day": 4}, "to": {"day": 10}}
    assert third == Example("cancel it", ("cancel",), (), 16)
    # slots come in order of start, whatever the object's key order
    assert [s.name for s in fourth.slots] == ["amount_of_money", "date", "time_from"]
    assert [s.text for s in fourth.slots] == ["50", "3 May", "9 am"]
    assert fourth.line == 17
    assert ds.intent_names() == ["cancel", "fees", "how_much",
                                 "make_open_apply_setup_get_activate", "transfer"]
    assert ds.slot_names() == ["amount_of_money", "date", "date_period", "time_from"]
    assert ds.texts[2] == "cancel it"


def test_demo_jsonl_layout_label_oos_and_plain_label(tmp_path):
    rows = [
        {"text": "我想提前还款3,500元，违约金怎么算？", "label": "early_repayment_penalty",
         "intents": ["early_repayment_penalty", "early_repayment"],
         "spans": [[6, 11, "number", {"amount": 3500.0}]],
         "slots": [{"name": "amount", "start": 6, "end": 12, "text": "3,500元",
                    "value": {"amount": 3500.0, "currency": "CNY"}}]},
        {"text": "今天天气怎么样", "label": "oos", "intents": [], "spans": [], "slots": []},
        {"text": "block my card", "label": "card_block"},
        {"text": "  hello  ", "label": "oos"},
    ]
    ds = read_annotated(write(tmp_path, "train.jsonl", "\n" + jsonl(rows)))
    assert [(e.text, e.intents, e.line) for e in ds] == [
        (rows[0]["text"], ("early_repayment_penalty", "early_repayment"), 2),
        ("今天天气怎么样", (), 3),
        ("block my card", ("card_block",), 4),
        ("  hello  ", (), 5),  # the text is kept as written: spans index into it
    ]
    assert ds[0].slots == (SlotSpan("amount", 6, 12, "3,500元",
                                    {"amount": 3500.0, "currency": "CNY"}),)


def test_every_out_of_scope_name_the_readers_accept_is_no_intent(tmp_path):
    """One definition of the out-of-scope label (headwise.text.labels) for the single-label
    readers and the annotated one alike."""
    from headwise.text.labels import is_oos_label

    names = ["oos", "OUT_OF_SCOPE", " out-of-scope ", "None", "other"]
    assert all(is_oos_label(n) for n in names) and not is_oos_label("card_block")
    rows = [{"text": f"t{i}", "label": n} for i, n in enumerate(names)]
    rows.append({"text": "x", "label": "other", "intents": []})
    ds = read_annotated(write(tmp_path, "o.jsonl", jsonl(rows)))
    assert [e.intents for e in ds] == [()] * len(rows)


def test_slot_span_hashes_without_its_value():
    a = SlotSpan("date", 0, 5, "3 May", {"day": 3})
    assert a == SlotSpan("date", 0, 5, "3 May", {"day": 3}) != SlotSpan("date", 0, 5, "3 May")
    assert len({a, SlotSpan("date", 0, 5, "3 May", {"day": 3})}) == 1


def test_repeated_intents_are_dropped_in_order(tmp_path):
    path = write(tmp_path, "a.jsonl", jsonl([{"text": "x", "intents": ["b", "a", "b"]}]))
    assert read_annotated(path)[0].intents == ("b", "a")


@pytest.mark.parametrize("row, problem", [
    ({"sentence": "x", "label": "y"}, "missing text (fields: sentence, label)"),
    ({"text": 3, "intents": []}, "text must be a string, got a number"),
    ({"text": "   ", "intents": []}, "empty text"),
    ({"text": "x", "intents": "fees"}, "intents must be a list of strings, got a string"),
    ({"text": "x", "intents": ["fees", 2]},
     "intents must be a list of strings, got a number at position 1"),
    ({"text": "x", "intents": ["fees", " "]},
     "intents must be a list of strings, got an empty string at position 1"),
    ({"text": "x", "label": "a", "intents": ["b"]}, "label 'a' is not one of the intents ['b']"),
    ({"text": "x", "label": "a", "intents": []}, "label 'a' but intents is empty"),
    ({"text": "abc", "slots": {"d": {"text": "abcd", "span": [0, 4]}}},
     "slot 'd': span [0, 4) is out of range for a text of 3 characters"),
    ({"text": "abc", "slots": {"d": {"text": "", "span": [2, 2]}}}, "is out of range"),
    ({"text": "abc", "slots": [{"name": "d", "start": -1, "end": 2}]}, "is out of range"),
    ({"text": "send £5 now", "slots": {"amount": {"text": "£50", "span": [5, 8]}}},
     "slot 'amount': its text '£50' is not text[5:8] '£5 '"),
    ({"text": "send £5 now", "slots": [{"name": "a", "start": 5, "end": 7, "text": "5 "}]},
     "its text '5 ' is not text[5:7] '£5'"),
    ({"text": "3 May 9am", "slots": {"date": {"span": [0, 5]}, "time": {"span": [4, 9]}}},
     "slots 'date' [0, 5) '3 May' and 'time' [4, 9) 'y 9am' overlap"),
    ({"text": "3 May", "slots": [{"name": "a", "start": 0, "end": 5},
                                 {"name": "b", "start": 0, "end": 5}]}, "overlap"),
    ({"text": "x", "slots": "date"}, "unknown layout: slots must be an object"),
    ({"text": "x", "slots": {"date": [0, 1]}}, "slot 'date' must be an object"),
    ({"text": "x", "slots": {"date": {"span": [0]}}}, "slot 'date': span must be [start, end]"),
    ({"text": "x", "slots": {"date": {"span": ["0", 1]}}}, "start must be an integer"),
    ({"text": "x", "slots": [{"start": 0, "end": 1}]}, "slots[0] must be an object with a name"),
    ([1, 2], "expected a JSON object, got an array"),
])
def test_bad_rows_name_file_line_and_problem(tmp_path, row, problem):
    good = {"text": "ok", "intents": ["a"]}
    path = write(tmp_path, "bad.jsonl", jsonl([good, row, good]))
    with pytest.raises(DataError) as info:
        read_annotated(path)
    assert info.value.line == 2 and problem in info.value.problem
    assert str(info.value).startswith(f"{path}:2: ")
    ds = read_annotated(path, skip_bad_rows=True)
    assert [e.line for e in ds] == [1, 3]
    assert len(ds.skipped) == 1 and ds.skipped[0][0] == 2 and problem in ds.skipped[0][1]


def test_bad_row_in_a_json_array_is_located_at_its_object(tmp_path):
    text = NLUPP.replace('"span": [10, 15]', '"span": [10, 16]')
    path = write(tmp_path, "fold1.json", text)
    with pytest.raises(DataError, match=r"fold1.json:17: slot 'date': its text '3 May' is "
                                        r"not text\[10:16\] '3 May '"):
        read_annotated(path)
    assert [e.line for e in read_annotated(path, skip_bad_rows=True)] == [2, 9, 16]


def test_whole_file_problems(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        read_annotated(tmp_path / "missing.json")
    with pytest.raises(DataError, match="unknown layout: expected a JSON array or JSON lines"):
        read_annotated(write(tmp_path, "a.csv", "text,label\nhi,greet\n"))
    with pytest.raises(DataError, match="a.json:3: invalid JSON"):
        read_annotated(write(tmp_path, "a.json", '[\n {"text": "a"},\n oops\n]'))
    with pytest.raises(DataError, match="no rows"):
        read_annotated(write(tmp_path, "empty.json", "[]"))
    bad = write(tmp_path, "allbad.jsonl", jsonl([{"text": ""}, {"x": 1}]))
    with pytest.raises(DataError, match=r"no usable rows \(all 2 were bad\)"):
        read_annotated(bad, skip_bad_rows=True)
    bom = write(tmp_path, "bom.jsonl", b"\xef\xbb\xbf" + jsonl([{"text": "a"}]).encode())
    assert read_annotated(bom)[0] == Example("a", (), (), 1)
    broken = write(tmp_path, "broken.jsonl", '{"text": "a"}\n{"text": \n')
    with pytest.raises(DataError, match="broken.jsonl:2: invalid JSON"):
        read_annotated(broken)


def test_read_nlupp_folds(tmp_path):
    write(tmp_path, "fold0.json", NLUPP)
    write(tmp_path, "fold3.json", '[{"text": "hi", "intents": ["greet"]}]')
    ds = read_nlupp(tmp_path, [3, np.int64(0)])
    assert ds.path == tmp_path and len(ds) == 5
    assert ds[0] == Example("hi", ("greet",), (), 1)
    assert ds[1].intents == ("how_much", "fees", "transfer")
    with pytest.raises(DataError, match=r"/fold\{1,2,4,5,6,7\}.json: no such NLU\+\+ fold "
                                        r"file \(folds in .*: 0, 3\)"):
        read_nlupp(tmp_path, range(8))
    with pytest.raises(DataError, match=r"/fold9.json: no such NLU\+\+ fold file"):
        read_nlupp(tmp_path, [0, 9])
    with pytest.raises(DataError, match=r"folds in .*nowhere: none"):
        read_nlupp(tmp_path / "nowhere", [0])
    with pytest.raises(ValueError, match="folds repeat"):
        read_nlupp(tmp_path, [0, 0])
    with pytest.raises(ValueError, match="folds is empty"):
        read_nlupp(tmp_path, [])
    with pytest.raises(ValueError, match="non-negative integer"):
        read_nlupp(tmp_path, ["0"])
    write(tmp_path, "fold4.json", '[\n{"text": "a"},\n{"text": "b", "intents": "x"}\n]')
    with pytest.raises(DataError, match="fold4.json:3: intents must be a list"):
        read_nlupp(tmp_path, [4])
    skipping = read_nlupp(tmp_path, [4], skip_bad_rows=True)
    assert len(skipping) == 1 and skipping.skipped[0][0] == 3
    assert skipping.skipped[0][1].startswith("fold4.json: intents must be a list")


def test_looks_multi_label(tmp_path):
    assert looks_multi_label(write(tmp_path, "n.json", NLUPP))
    assert looks_multi_label(write(tmp_path, "d.jsonl", jsonl(
        [{"text": "a", "label": "x", "intents": ["x"]}])))
    # the first row of an NLU++ fold may lack intents; a later one has them
    assert looks_multi_label(write(tmp_path, "late.json", json.dumps(
        [{"text": "next week"}, {"text": "a", "intents": ["x"]}])))
    assert not looks_multi_label(write(tmp_path, "c.csv", "text,label\na,b\n"))
    assert not looks_multi_label(write(tmp_path, "clue.json", jsonl(
        [{"id": 1, "label": "3", "sentence": "退款", "label_des": "refund"}])))
    assert not looks_multi_label(write(tmp_path, "s.jsonl", jsonl([{"text": "a",
                                                                    "intents": "x"}])))
    assert not looks_multi_label(write(tmp_path, "broken.json", "[{"))
    with pytest.raises(DataError, match="no such file"):
        looks_multi_label(tmp_path / "missing.json")


def test_reference_date_is_the_files_and_must_agree(tmp_path):
    from datetime import date

    path = tmp_path / "d.jsonl"
    rows = [{"text": "明天还款", "intents": ["repay"], "reference_date": "2026-01-15"},
            {"text": "hello", "intents": ["greet"]},
            {"text": "下个月5号", "intents": ["repay"], "reference_date": "2026-01-15"}]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n",
                    encoding="utf-8")
    assert read_annotated(path).reference_date == date(2026, 1, 15)
    path.write_text(json.dumps(rows[1]) + "\n", encoding="utf-8")
    assert read_annotated(path).reference_date is None
    rows[2]["reference_date"] = "2026-02-01"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"d.jsonl:3: reference_date 2026-02-01 differs from "
                                        r"2026-01-15"):
        read_annotated(path)
    for bad in ("2026-1-5", "2026-13-01", 20260115):
        rows[2]["reference_date"] = bad
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
        with pytest.raises(DataError, match="d.jsonl:3: reference_date must be a date "
                                            "YYYY-MM-DD"):
            read_annotated(path)
