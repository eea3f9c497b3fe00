"""Data files as service teams have them: GB18030/GBK (Chinese Excel's CSV), UTF-16/32 with a
byte-order mark, UTF-8 with or without one, detected or named, and Excel workbooks; each
reads to the very rows of the UTF-8 CSV, and a wrong encoding is a clear error."""

from __future__ import annotations

import codecs
import datetime
import io
import json

import pytest

from headwise.text.annotations import looks_multi_label, read_annotated
from headwise.text.decoding import (
    ENCODING_HINT,
    check_encoding,
    decode_lines,
    detect_encoding,
    looks_chinese,
)
from headwise.text.readers import DataError, read_examples

openpyxl = pytest.importorskip("openpyxl")

#: a customer-service CSV: Chinese and English, a quoted comma, a quoted two-line text, a
#: blank line, CRLF line ends
CSV = ("text,label\r\n"
       "我的银行卡丢了,挂失\r\n"
       "\"转账, 到我朋友的账户\",转账\r\n"
       "\"查询余额\n还剩多少钱\",余额\r\n"
       "\r\n"
       "what is my balance,余额\r\n"
       "信用卡额度“临时”提高…,额度\r\n")
#: (text, label, line) of CSV, by hand
ROWS = [("我的银行卡丢了", "挂失", 2), ("转账, 到我朋友的账户", "转账", 3),
        ("查询余额\n还剩多少钱", "余额", 4), ("what is my balance", "余额", 7),
        ("信用卡额度“临时”提高…", "额度", 8)]
#: how each file is written: its name -> its bytes
ENCODED = {
    "utf8.csv": CSV.encode("utf-8"),
    "utf8_bom.csv": codecs.BOM_UTF8 + CSV.encode("utf-8"),
    "gbk.csv": CSV.encode("gbk"),
    "gb18030.csv": CSV.encode("gb18030"),
    "utf16.csv": CSV.encode("utf-16"),  # the byte-order mark, then the platform's order
    "utf16le.csv": codecs.BOM_UTF16_LE + CSV.encode("utf-16-le"),
    "utf16be.csv": codecs.BOM_UTF16_BE + CSV.encode("utf-16-be"),
    "utf32.csv": CSV.encode("utf-32"),
}


def rows(ds):
    return [(e.text, e.label, e.line) for e in ds]


@pytest.mark.parametrize("name", sorted(ENCODED))
def test_every_encoding_reads_to_the_rows_of_the_utf8_csv(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(ENCODED[name])
    assert rows(read_examples(path)) == ROWS


@pytest.mark.parametrize("name", sorted(ENCODED))
def test_json_lines_read_alike_in_every_encoding(tmp_path, name):
    text = "".join(json.dumps({"text": t, "label": k}, ensure_ascii=False) + "\n"
                   for t, k, _ in ROWS)
    encoding = name.split(".")[0].replace("_bom", "").replace("utf", "utf-")
    data = ENCODED[name][:len(ENCODED[name]) - len(CSV.encode(encoding))] \
        + text.encode(encoding)  # the same byte-order mark, if any
    path = tmp_path / name.replace(".csv", ".jsonl")
    path.write_bytes(data)
    assert rows(read_examples(path)) == [(t, k, i) for i, (t, k, _) in enumerate(ROWS, 1)]
    array = path.with_suffix(".json")  # a JSON array is decoded whole
    array.write_bytes(data[:len(data) - len(text.encode(encoding))] + json.dumps(
        [{"text": t, "label": k} for t, k, _ in ROWS], ensure_ascii=False).encode(encoding))
    assert [e.text for e in read_examples(array)] == [t for t, _, _ in ROWS]


def test_a_named_encoding_is_used_as_given(tmp_path):
    big5 = tmp_path / "big5.csv"
    big5.write_bytes("text,label\n我的卡不見了,掛失\n".encode("big5"))
    assert rows(read_examples(big5, encoding="big5")) == [("我的卡不見了", "掛失", 2)]
    gbk = tmp_path / "gbk.csv"
    gbk.write_bytes(ENCODED["gbk.csv"])
    assert rows(read_examples(gbk, encoding="GBK")) == ROWS
    assert rows(read_examples(gbk, encoding="gb18030")) == ROWS


def test_a_wrong_encoding_is_a_clear_error(tmp_path):
    path = tmp_path / "gbk.csv"
    path.write_bytes(ENCODED["gbk.csv"])
    with pytest.raises(ValueError, match=r"unknown encoding 'gbkk' \(--encoding\)"):
        read_examples(path, encoding="gbkk")
    with pytest.raises(ValueError, match="'base64' is not a text encoding"):
        read_examples(path, encoding="base64")
    # GBK read as UTF-8: the first row's first byte, and what to check
    with pytest.raises(DataError, match=r"gbk\.csv:2: not UTF-8 \(byte 0xce at column 1\); "
                                        r"is --encoding utf-8 the file's encoding\?"):
        read_examples(path, encoding="utf-8")
    with pytest.raises(DataError) as e:  # every row has Chinese, even in its label
        read_examples(path, encoding="utf-8", skip_bad_rows=True)
    # (line 3: 转 is D7 AA in GBK, a valid UTF-8 sequence; 账's D5 is not)
    assert e.value.problem == ("no usable rows (all 5 were bad: line 2: not UTF-8 (byte 0xce "
                               "at column 1); line 3: not UTF-8 (byte 0xd5 at column 3); line "
                               "4: not UTF-8 (byte 0xb2 at column 2), ...); is --encoding "
                               "utf-8 the file's encoding?")
    # UTF-16 read as GB18030: its byte-order mark does not decode; without one, NUL
    # characters, and a hint that names UTF-16
    wide = tmp_path / "wide.csv"
    wide.write_bytes(ENCODED["utf16le.csv"])
    with pytest.raises(DataError, match=r"wide\.csv:1: not GB18030 \(byte 0xff at column 1\)"):
        read_examples(wide, encoding="gb18030")
    wide.write_bytes("text,label\nhello,a\n".encode("utf-16-le"))
    with pytest.raises(DataError, match=r"header has NUL characters: is the file UTF-16\? "
                                        r"try --encoding utf-16"):
        read_examples(wide, encoding="gb18030")


def test_undetected_bytes_name_the_encoding_to_try(tmp_path):
    latin = tmp_path / "latin.csv"  # Latin-1 is not detected: neither UTF-8 nor Chinese
    latin.write_bytes("text,label\ncafé crème,a\nnaïve,b\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"latin\.csv:2: not UTF-8 \(byte 0xe9 at column 4\);"
                                        r" is the file in another encoding\? .*gb18030"):
        read_examples(latin)
    with pytest.raises(DataError) as e:
        read_examples(latin, skip_bad_rows=True)
    assert e.value.problem == ("no usable rows (all 2 were bad: line 2: not UTF-8 (byte 0xe9 "
                               "at column 4); line 3: not UTF-8 (byte 0xef at column 3)); "
                               + ENCODING_HINT)
    assert [e.text for e in read_examples(latin, encoding="latin-1")] == ["café crème",
                                                                         "naïve"]


def test_detection_by_mark_then_utf8_then_chinese_gb18030():
    chinese = "我的银行卡丢了，怎么挂失？".encode("gbk")
    assert detect_encoding(codecs.BOM_UTF8 + b"x") == "utf-8"
    assert detect_encoding(codecs.BOM_UTF16_LE + "x".encode("utf-16-le")) == "utf-16"
    assert detect_encoding(codecs.BOM_UTF16_BE + "x".encode("utf-16-be")) == "utf-16"
    assert detect_encoding(codecs.BOM_UTF32_LE + "x".encode("utf-32-le")) == "utf-32"
    assert detect_encoding("中文".encode()) == detect_encoding(b"ascii") == "utf-8"
    assert detect_encoding(chinese) == "gb18030"
    assert detect_encoding("café".encode("latin-1")) == "utf-8"  # not valid GB18030
    # cp1252 that happens to decode as GB18030, but not to Chinese text
    assert "Müller".encode("cp1252").decode("gb18030")
    assert detect_encoding("Müller".encode("cp1252")) == "utf-8"
    # a head cut inside a character: judged on its whole lines
    head = ("text\n" + "中文" * 10 + "\n").encode() + "中".encode()[:2]
    assert detect_encoding(head, whole=False) == "utf-8"
    assert detect_encoding(head) == "utf-8"  # the whole file: neither UTF-8 nor GB18030
    assert looks_chinese("转账，“到”朋友…") and not looks_chinese("naïve") \
        and not looks_chinese("ascii")
    assert check_encoding("GBK") == "gbk" and check_encoding("utf8") == "utf-8"


@pytest.mark.parametrize("encoding", ["utf-8", "gb18030", "utf-16", "utf-32-be"])
@pytest.mark.parametrize("size", [1, 2, 3, 5, 4096])
def test_decode_lines_is_the_same_in_blocks_of_any_size(encoding, size):
    text = "a\r\nb中\rc\n\n转账\r\r\nlast, no end"
    data = text.encode(encoding)
    blocks = [data[i:i + size] for i in range(0, len(data), size)]
    want = io.StringIO(text, newline="").readlines()  # \n, \r\n or a lone \r ends a line
    got = list(decode_lines(blocks, encoding))
    assert [t for _, t, _ in got] == want
    assert [n for n, _, _ in got] == list(range(1, len(want) + 1))
    assert all(p is None for _, _, p in got)


def test_undecodable_bytes_name_their_line_and_column_in_any_encoding():
    utf16 = "ok\nab".encode("utf-16-le") + b"\x00\xdc" + "c\nfine\n".encode("utf-16-le")
    got = list(decode_lines([utf16], "utf-16-le"))
    assert [(n, p) for n, _, p in got] == [(1, None), (2, "not UTF-16-LE (byte 0x00 at "
                                                          "column 3)"), (3, None)]
    assert got[2][1] == "fine\n"
    gbk = "好\n".encode("gbk") + b"x\x81\n"  # a lead byte without its second byte
    assert [p for _, _, p in decode_lines([gbk], "gbk")] == \
        [None, "not GBK (byte 0x81 at column 2)"]


def _workbook(path, rows, sheet="Sheet1", more=None):
    book = openpyxl.Workbook()
    ws = book.active
    ws.title = sheet
    for row in rows:
        ws.append(row)
    if more is not None:
        book.create_sheet(more[0])
        for row in more[1]:
            book[more[0]].append(row)
    book.save(path)
    return path


def test_an_excel_sheet_reads_to_the_rows_of_the_csv(tmp_path):
    # the CSV without its blank line and two-line text: rows at the same lines
    lines = [r for r in CSV.split("\r\n")[1:] if r and "\n" not in r and "查询" not in r]
    csv_path = tmp_path / "same.csv"
    csv_path.write_text("text,label\n" + "\n".join(lines) + "\n", encoding="utf-8")
    cells = [["text", "label"], ["我的银行卡丢了", "挂失"], ["转账, 到我朋友的账户", "转账"],
             ["what is my balance", "余额"], ["信用卡额度“临时”提高…", "额度"]]
    xlsx = _workbook(tmp_path / "chats.xlsx", cells)
    assert rows(read_examples(xlsx)) == rows(read_examples(csv_path))
    assert len(read_examples(xlsx)) == 4


def test_excel_cells_sheets_and_refusals(tmp_path):
    cells = [["id", "text", "label", "when", "score"],
             [1, "lost my card", 12, datetime.date(2026, 3, 1), 1.5],
             [None, None, None],  # an empty row: skipped, as a blank line
             [2, "  balance  ", "balance"],  # the empty cells at its end left out
             [3, "", "x"]]
    path = _workbook(tmp_path / "b.xlsx", cells, more=("Other", [["query", "intent"],
                                                                 ["other sheet", "o"]]))
    ds = read_examples(path, skip_bad_rows=True)
    assert rows(ds) == [("lost my card", "12", 2), ("balance", "balance", 4)]
    assert ds.skipped == [(5, "empty text")]
    assert rows(read_examples(path, sheet="Other")) == [("other sheet", "o", 2)]
    assert rows(read_examples(path, format="xlsx", text_column="when", label_column="score",
                              skip_bad_rows=True)) == [("2026-03-01", "1.5", 2)]
    with pytest.raises(DataError, match=r"b\.xlsx: no sheet 'Nope' \(sheets: Sheet1, Other\)"):
        read_examples(path, sheet="Nope")
    with pytest.raises(ValueError, match="--encoding gbk is for text files; .* workbook"):
        read_examples(path, encoding="gbk")
    with pytest.raises(ValueError, match="--sheet S names a sheet of an Excel workbook"):
        read_examples(tmp_path / "b.xlsx", format="csv", sheet="S")
    fake = tmp_path / "fake.xlsx"
    fake.write_bytes(ENCODED["utf8.csv"])
    with pytest.raises(DataError, match=r"fake\.xlsx: not an Excel workbook"):
        read_examples(fake)
    old = tmp_path / "old.xls"
    old.write_bytes(b"\xd0\xcf\x11\xe0")
    with pytest.raises(DataError, match=r"old\.xls: an \.xls workbook .* save it as \.xlsx"):
        read_examples(old)


def test_annotated_examples_are_detected_too(tmp_path):
    rows_ = [{"text": "转账到储蓄账户", "intents": ["转账"]},
             {"text": "cancel it", "intents": ["cancel"]}]
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows_)
    for encoding in ("utf-8", "gbk", "utf-16"):
        path = tmp_path / f"{encoding}.jsonl"
        path.write_bytes(text.encode(encoding))
        got = read_annotated(path)
        assert [(e.text, e.intents) for e in got.examples] == \
            [(r["text"], tuple(r["intents"])) for r in rows_], encoding
        assert looks_multi_label(path), encoding  # headwise train tells it multi-label
