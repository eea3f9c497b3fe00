"""Dataset readers: CSV/TSV, JSON lines and arrays, BANKING77 and CLUE layouts, bad rows."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from headwise.text.dataset import Dataset, Example, SlotSpan
from headwise.text.readers import DataError, read_examples, unseen_labels


def write(tmp_path, name: str, content: str | bytes):
    path = tmp_path / name
    if isinstance(content, str):
        content = content.encode("utf-8")
    path.write_bytes(content)
    return path


def rows(ds: Dataset) -> list[tuple[str, str | None, int]]:
    return [(e.text, e.label, e.line) for e in ds]


# -- formats -----------------------------------------------------------------------------------
def test_csv_quotes_embedded_newlines_and_line_numbers(tmp_path):
    path = write(tmp_path, "data.csv",
                 'text,category\n'                                      # 1
                 'How do I top up?,top_up\n'                            # 2
                 '"Hi, my card, it broke",card_broken\n'                # 3
                 '"first line\n'                                        # 4
                 'second ""quoted"" line",multi\n'                      # 5
                 '\n'                                                   # 6 (blank)
                 '  padded text  , spaced label \n'                     # 7
                 '"a\n\nb",gap\n'                                       # 8-10
                 'last,top_up\n')                                       # 11
    ds = read_examples(path)
    assert rows(ds) == [
        ("How do I top up?", "top_up", 2),
        ("Hi, my card, it broke", "card_broken", 3),
        ('first line\nsecond "quoted" line', "multi", 4),
        ("padded text", "spaced label", 7),
        ("a\n\nb", "gap", 8),
        ("last", "top_up", 11),
    ]
    assert ds.path == path and ds.skipped == []
    assert ds.intent_names() == ["card_broken", "gap", "multi", "spaced label", "top_up"]


def test_csv_bom_crlf_tsv_and_header_names(tmp_path):
    bom = write(tmp_path, "bom.csv", b"\xef\xbb\xbfText,Intent\r\nbook a table,book\r\n"
                                     b"\"two\r\nlines\",other\r\nthird,book\r\n")
    assert rows(read_examples(bom)) == [("book a table", "book", 2), ("two\r\nlines", "other", 3),
                                        ("third", "book", 5)]
    tsv = write(tmp_path, "data.tsv", "id\tutterance\tlabel\n7\tcancel, please\tcancel\n")
    assert rows(read_examples(tsv)) == [("cancel, please", "cancel", 2)]
    # explicit columns win over the defaults, and must match exactly
    both = write(tmp_path, "both.csv", "text,label,query,intent\na,b,c,d\n")
    assert rows(read_examples(both)) == [("a", "b", 2)]
    assert rows(read_examples(both, text_column="query", label_column="intent")) == \
        [("c", "d", 2)]
    with pytest.raises(DataError, match=r"both\.csv:1: no text column 'Query'.*"
                                        r"\(text, label, query, intent\); name it with "
                                        r"--columns NAME"):
        read_examples(both, text_column="Query")
    with pytest.raises(DataError, match=r"both\.csv:1: no label column 'topic'.*"
                                        r"--columns TEXT,NAME"):
        read_examples(both, label_column="topic")


def test_banking77_layout(tmp_path):
    text = 'text,category\nmy new card has not come yet,card_arrival\n' \
           '"Is the card posted, or is it lost?",card_arrival\n'
    for name, fmt in (("train.csv", "auto"), ("train.txt", "banking77")):
        ds = read_examples(write(tmp_path, name, text), format=fmt)
        assert rows(ds) == [("my new card has not come yet", "card_arrival", 2),
                            ("Is the card posted, or is it lost?",
                             "card_arrival", 3)]


def test_json_lines_and_clue_layout(tmp_path):
    plain = write(tmp_path, "data.jsonl",
                  '{"text": " book a table ", "intent": "book"}\n'
                  '\n'
                  '   \n'
                  '{"utterance": "weather?", "label": 3}\n')
    assert rows(read_examples(plain)) == [("book a table", "book", 1), ("weather?", "3", 4)]
    clue = ('{"id": 0, "label": "57", "sentence": "收货以后再返我30元可以吗", '
            '"label_des": "询问返现"}\n'
            '{"id": 1, "label": "16", "sentence": "地址就这样不用改", '
            '"label_des": "收件信息不修改"}\n'
            '{"id": 2, "label": 60, "sentence": "这两个颜色有什么不同"}\n')
    expected = [("收货以后再返我30元可以吗", "询问返现", 1),
                ("地址就这样不用改", "收件信息不修改", 2),
                ("这两个颜色有什么不同", "60", 3)]   # no label_des: str(label)
    # DataCLUE names its JSON-lines files .json; auto recognises the layout by its keys
    assert rows(read_examples(write(tmp_path, "train.json", clue))) == expected
    assert rows(read_examples(write(tmp_path, "train.jsonl", clue), format="clue")) == expected
    # without the CLUE rule, "label" (the numeric id) would win over label_des
    assert read_examples(write(tmp_path, "c.json", clue), label_column="label")[0].label == "57"


def test_json_array(tmp_path):
    path = write(tmp_path, "data.json",
                 '\ufeff[\n'                                     # 1
                 '  {"text": "one", "label": "a"},\n'            # 2
                 '  {"text": "two",\n'                           # 3
                 '   "label": "b"}, {"text": "three", "label": "a"}\n'  # 4
                 ']\n')
    assert rows(read_examples(path)) == [("one", "a", 2), ("two", "b", 3), ("three", "a", 4)]
    bad = write(tmp_path, "bad.json", '[\n{"text": "x", "label": "a"},\n["no"],\n'
                                      '{"text": "y", "label": "b"}\n]')
    with pytest.raises(DataError, match=r"bad\.json:3: expected a JSON object, got an array"):
        read_examples(bad)
    assert read_examples(bad, skip_bad_rows=True).skipped == \
        [(3, "expected a JSON object, got an array")]
    broken = write(tmp_path, "broken.json", '[\n{"text": "x", "label": "a"}\n{"text": "y"}\n]')
    with pytest.raises(DataError, match=r"broken\.json:3: invalid JSON: Expecting ','"):
        read_examples(broken, skip_bad_rows=True)   # a broken array cannot be resumed


def test_unlabelled_data(tmp_path):
    path = write(tmp_path, "predict.csv", "id,text\n1,hello there\n2,  good bye \n")
    with pytest.raises(DataError, match=r"predict\.csv:1: no label column .*require_labels"):
        read_examples(path)
    ds = read_examples(path, require_labels=False)
    assert rows(ds) == [("hello there", None, 2), ("good bye", None, 3)]
    assert ds.labels == [None, None] and ds.intent_names() == []
    jsonl = write(tmp_path, "p.jsonl", '{"text": "a"}\n{"text": "b", "label": ""}\n'
                                       '{"text": "c", "label": "x"}\n')
    assert read_examples(jsonl, require_labels=False).labels == [None, None, "x"]


def test_dataset_api():
    ds = Dataset([Example("a", ("y",), (), 2), Example("b", ("x",), (), 3),
                  Example("c", (), (), 4)], path=Path("d.csv"))
    assert len(ds) == 3 and ds[1] == Example("b", ("x",), (), 3) and ds[-1].text == "c"
    assert ds.texts == ["a", "b", "c"] and ds.labels == ["y", "x", None]
    assert ds.intent_names() == ["x", "y"] and [e.line for e in ds] == [2, 3, 4]
    assert ds.slot_names() == [] and ds.reference_date is None
    with pytest.raises(AttributeError):
        ds[0].text = "changed"   # frozen


def test_one_example_type_for_single_and_multi_intent_rows():
    amount = SlotSpan("amount", 9, 11, "50")
    multi = Example("transfer 50 and check", ("transfer", "balance"), (amount,), 7)
    ds = Dataset([Example("hi", ("greet",), (), 6), multi, Example("meh", (), (), 8)],
                 path=Path("d.jsonl"))
    assert ds.intent_names() == ["balance", "greet", "transfer"]
    assert ds.slot_names() == ["amount"]
    assert ds[0].label == "greet" and ds[2].label is None
    # single-label code asking a multi-intent row for its one label: told why, and where
    with pytest.raises(ValueError, match=r"line 7: .* has 2 intents \(transfer, balance\).*"
                                         r"multi_label"):
        _ = multi.label
    with pytest.raises(ValueError, match="line 7"):
        _ = ds.labels
    # an intent given as a bare string (not a tuple) is refused, not read letter by letter
    with pytest.raises(TypeError, match="intents must be a tuple of strings"):
        Example("hi", "greet", (), 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="slots must be a tuple of SlotSpan"):
        Example("hi", ("greet",), [amount], 1)  # type: ignore[arg-type]


# -- bad rows ----------------------------------------------------------------------------------
BAD_CSV = [
    ("text,label\nok,a\ntoo,many,fields\n", 3, r"expected 2 fields \(text, label\), got 3"),
    ("text,label\nok,a\nmissing\n", 3, "expected 2 fields"),
    ("text,label\nok,a\n,b\n", 3, "empty text"),
    ("text,label\nok,a\n  \t ,b\n", 3, "empty text"),
    ("text,label\nok,a\nno label,\n", 3, "missing or empty label"),
    ("text,label\nok,a\nno label,   \n", 3, "missing or empty label"),
    ('text,label\n"a\nb",x\nfine,y\n"unclosed,z\nmore,w\n', 5,
     r"expected 2 fields .*got 1 \(an unclosed quote\?\)"),
]


@pytest.mark.parametrize(("content", "line", "problem"), BAD_CSV)
def test_bad_csv_rows_name_their_line(tmp_path, content, line, problem):
    path = write(tmp_path, "bad.csv", content)
    with pytest.raises(DataError, match=rf"bad\.csv:{line}: {problem}") as info:
        read_examples(path)
    assert info.value.path == path and info.value.line == line
    ds = read_examples(path, skip_bad_rows=True)
    assert [s[0] for s in ds.skipped] == [line]


BAD_JSONL = [
    ('{"text": "a", "label": "x"}\n{"text": "b", "label": "x"\n', 2, "invalid JSON: Expecting"),
    ('{"text": "a", "label": "x"}\n\n[1, 2]\n', 3, "expected a JSON object, got an array"),
    ('{"text": "a", "label": "x"}\n"just a string"\n', 2, "expected a JSON object, got a string"),
    ('{"text": "a", "label": "x"}\n{"body": "b", "label": "x"}\n', 2,
     r"no text field one of text, sentence, query, utterance \(fields: body, label\)"),
    ('{"text": "a", "label": "x"}\n{"text": "  ", "label": "x"}\n', 2, "empty text"),
    ('{"text": "a", "label": "x"}\n{"text": 5, "label": "x"}\n', 2,
     "text must be a string, got a number"),
    ('{"text": "a", "label": "x"}\n{"text": "b"}\n', 2, "missing or empty label"),
    ('{"text": "a", "label": "x"}\n{"text": "b", "label": null}\n', 2, "missing or empty label"),
    ('{"text": "a", "label": "x"}\n{"text": "b", "label": ["x"]}\n', 2,
     "label must be a string or an integer, got an array"),
]


@pytest.mark.parametrize(("content", "line", "problem"), BAD_JSONL)
def test_bad_json_lines_name_their_line(tmp_path, content, line, problem):
    path = write(tmp_path, "bad.jsonl", content)
    with pytest.raises(DataError, match=rf"bad\.jsonl:{line}: {problem}"):
        read_examples(path)
    ds = read_examples(path, skip_bad_rows=True)
    assert [s[0] for s in ds.skipped] == [line] and rows(ds) == [("a", "x", 1)]


def test_undecodable_bytes_name_the_line_of_the_byte(tmp_path):
    path = write(tmp_path, "bytes.csv",
                 b'text,label\nok,a\n"multi\nline with \xff byte",b\nafter,c\n')
    with pytest.raises(DataError, match=r"bytes\.csv:4: not UTF-8 \(byte 0xff at column 11\)"):
        read_examples(path)
    ds = read_examples(path, skip_bad_rows=True)
    assert rows(ds) == [("ok", "a", 2), ("after", "c", 5)] and ds.skipped[0][0] == 4
    jsonl = write(tmp_path, "bytes.jsonl",
                  '{"text": "é", "label": "a"}\n'.encode() + b'{"text": "\xc3(", "label": "b"}\n')
    with pytest.raises(DataError, match=r"bytes\.jsonl:2: not UTF-8 \(byte 0xc3 at column 11\)"):
        read_examples(jsonl)
    header = write(tmp_path, "header.csv", b"te\xffxt,label\na,b\n")
    with pytest.raises(DataError, match=r"header\.csv:1: not UTF-8"):
        read_examples(header, skip_bad_rows=True)


def test_file_level_problems_raise_even_when_skipping(tmp_path):
    with pytest.raises(DataError, match=r"missing\.csv: no such file") as info:
        read_examples(tmp_path / "missing.csv", skip_bad_rows=True)
    assert info.value.line is None
    for name, content in (("empty.csv", ""), ("blank.jsonl", "\n  \n"),
                          ("header.csv", "text,label\n"), ("empty.json", "[ ]")):
        with pytest.raises(DataError, match=rf"{name.replace('.', '[.]')}: no rows"):
            read_examples(write(tmp_path, name, content), skip_bad_rows=True)
    all_bad = write(tmp_path, "allbad.csv", "text,label\n,a\nb,\n")
    with pytest.raises(DataError, match=r"no usable rows \(all 2 were bad: line 2: empty "
                                        r"text; line 3: missing or empty label\)"):
        read_examples(all_bad, skip_bad_rows=True)
    with pytest.raises(ValueError, match="format must be one of"):
        read_examples(all_bad, format="xml")


def test_skip_bad_rows_keeps_the_good_ones(tmp_path):
    path = write(tmp_path, "mixed.csv",
                 "text,label\n"      # 1
                 "good one,a\n"      # 2
                 ",a\n"              # 3 empty text
                 "good two,b\n"      # 4
                 "x,y,z\n"           # 5 wrong field count
                 "no label,\n"       # 6 empty label
                 "good three,a\n")   # 7
    ds = read_examples(path, skip_bad_rows=True)
    assert rows(ds) == [("good one", "a", 2), ("good two", "b", 4), ("good three", "a", 7)]
    assert ds.skipped == [(3, "empty text"),
                          (5, "expected 2 fields (text, label), got 3"),
                          (6, "missing or empty label")]
    # without labels required, the empty label is a None label, not a bad row
    loose = read_examples(path, skip_bad_rows=True, require_labels=False)
    assert len(loose) == 4 and loose[2] == Example("no label", (), (), 6)
    assert [s[0] for s in loose.skipped] == [3, 5]


def test_data_error_attributes_and_pickling(tmp_path):
    err = DataError(tmp_path / "f.csv", 12, "empty text")
    assert str(err) == f"{tmp_path / 'f.csv'}:12: empty text" and isinstance(err, ValueError)
    assert (err.line, err.problem) == (12, "empty text")
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == str(err) and again.line == 12
    assert str(DataError("g.json", None, "no rows")) == "g.json: no rows"


def test_unseen_labels(tmp_path):
    train = read_examples(write(tmp_path, "train.csv", "text,label\na,x\nb,y\nc,x\n"))
    test = read_examples(write(tmp_path, "test.csv",
                               "text,label\na,x\nb,z\nc,w\nd,z\ne,y\nf,w\ng,v\n"))
    assert unseen_labels(train, test) == {"w": 2, "z": 2, "v": 1}
    assert list(unseen_labels(train, test)) == ["w", "z", "v"]   # by count, then name
    assert unseen_labels(["x", "y", "z", "w", "v"], test) == {}
    assert unseen_labels(iter(["x"]), test) == {"w": 2, "z": 2, "v": 1, "y": 1}
