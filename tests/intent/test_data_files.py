"""Files as a customer-service team has them, end to end: a GBK CSV (Chinese Excel's), a
UTF-16 CSV, a UTF-8 CSV with a byte-order mark and an Excel workbook each train, evaluate
and stream through ``headwise predict --data`` as the UTF-8 CSV does; the input's other
columns ride along (``--columns TEXT,KEEP...``); a stream none of whose rows decodes fails, saying
what to try; a wrong ``--encoding`` is a clear error."""

from __future__ import annotations

import codecs
import csv
import io
import json

import pytest
from tiny_corpus import INTENTS

from headwise.cli import main
from headwise.intent.batch import CSV_COLUMNS, JSONL_KEYS, RowReader, partial_path, state_path

openpyxl = pytest.importorskip("openpyxl")

#: Chinese and English requests of the tiny corpus's intents, with a session id and agent
CHINESE = {"card_lost": ["我的银行卡丢了", "信用卡被偷了怎么办", "找不到我的卡"],
           "transfer": ["转账给我朋友", "汇款到另一家银行", "怎么向国外转账"],
           "balance": ["查询余额", "我还剩多少钱", "账户余额是多少"]}
ROWS = [(f"s{i:03d}", text, intent, "客服" + str(i % 2))
        for i, (intent, text) in enumerate(
            (k, t) for k in INTENTS for t in INTENTS[k] + CHINESE[k])]
HEADER = ("id", "text", "label", "agent")


def _csv_text(rows) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    w.writerow(HEADER)
    w.writerows(rows)
    return buf.getvalue()


def _files(d, rows=ROWS) -> dict[str, object]:
    """The same rows as each kind of file: name -> path."""
    text = _csv_text(rows)
    files = {"utf8.csv": text.encode("utf-8"),
             "utf8_bom.csv": codecs.BOM_UTF8 + text.encode("utf-8"),
             "gbk.csv": text.encode("gbk"),
             "utf16.csv": text.encode("utf-16")}
    paths = {}
    for name, data in files.items():
        (d / name).write_bytes(data)
        paths[name] = d / name
    book = openpyxl.Workbook()
    ws = book.active
    ws.append(list(HEADER))
    for row in rows:
        ws.append(list(row))
    book.save(d / "chats.xlsx")
    paths["chats.xlsx"] = d / "chats.xlsx"
    return paths


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return _files(tmp_path_factory.mktemp("files"))


@pytest.fixture(scope="module")
def models(files, tmp_path_factory):
    """A TF-IDF model trained on each file (deterministic: equal data, equal model)."""
    d = tmp_path_factory.mktemp("models")
    out = {}
    for name, path in files.items():
        out[name] = d / name
        assert main(["train", "--data", str(path), "--no-valid", "--model", "tfidf",
                     "--out", str(out[name]), "--quiet"]) == 0
    return out


def _jsonl(path):
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def test_every_file_trains_the_model_of_the_utf8_csv(models, files, capsys):
    capsys.readouterr()
    want = None
    for name, model in models.items():
        summary = json.loads((model / "train_summary.json").read_text(encoding="utf-8"))
        assert summary["train_examples"] == len(ROWS), name
        tfidf = json.loads((model / "tfidf.json").read_text(encoding="utf-8"))
        got = (tfidf["labels"], [v["vocabulary"] for v in tfidf["vectorizers"]])
        assert any("转" in term for vocabulary in got[1] for term in vocabulary), name
        want = got if want is None else want
        assert got == want, name


def test_eval_reads_every_file_and_takes_encoding(models, files, tmp_path, capsys):
    model = models["utf8.csv"]
    reports = {}
    for name, path in files.items():
        assert main(["eval", str(model), "--data", str(path), "--json",
                     "--out", str(tmp_path / name)]) == 0
        reports[name] = json.loads(capsys.readouterr().out)
        assert reports[name]["num_examples"] == len(ROWS)
    assert len({r["accuracy"] for r in reports.values()}) == 1
    assert main(["eval", str(model), "--data", str(files["gbk.csv"]), "--encoding", "gbk",
                 "--json", "--out", str(tmp_path / "named")]) == 0
    assert json.loads(capsys.readouterr().out)["accuracy"] == reports["utf8.csv"]["accuracy"]


def test_every_file_streams_the_answers_of_the_utf8_csv(models, files, tmp_path, capsys):
    model = models["utf8.csv"]
    answers = {}
    for name, path in files.items():
        out = tmp_path / f"{name}.jsonl"
        assert main(["predict", str(model), "--data", str(path), "--out", str(out),
                     "--quiet"]) == 0
        answers[name] = _jsonl(out)
        assert f"wrote {len(ROWS)} answers" in capsys.readouterr().err, name
    want = answers["utf8.csv"]
    assert [r["text"] for r in want] == [t for _, t, _, _ in ROWS]
    assert [r["line"] for r in want] == list(range(2, len(ROWS) + 2))
    for name, got in answers.items():
        assert got == want, name
    # the stream's rows are the readers' rows
    for name, path in files.items():
        reader = RowReader(path)
        assert [(r.line, r.text) for r in reader] == [(r["line"], r["text"]) for r in want]
        assert reader.encoding == {"utf8.csv": "utf-8", "utf8_bom.csv": "utf-8",
                                   "gbk.csv": "gb18030", "utf16.csv": "utf-16",
                                   "chats.xlsx": None}[name]


def test_keep_columns_carry_the_session_and_agent(models, files, tmp_path, capsys):
    model = models["utf8.csv"]
    for name in ("gbk.csv", "chats.xlsx"):
        out = tmp_path / f"{name}.jsonl"
        assert main(["predict", str(model), "--data", str(files[name]), "--out", str(out),
                     "--columns", ",id,agent", "--quiet"]) == 0
        got = _jsonl(out)
        assert all(list(r) == ["line", "id", "agent", *JSONL_KEYS[1:]] for r in got)
        assert [(r["id"], r["text"], r["agent"]) for r in got] == \
            [(i, t, a) for i, t, _, a in ROWS]
    out = tmp_path / "kept.csv"
    assert main(["predict", str(model), "--data", str(files["utf16.csv"]), "--out", str(out),
                 "--columns", "text,agent", "--quiet"]) == 0
    with out.open(newline="", encoding="utf-8") as f:
        table = list(csv.reader(f))
    assert table[0] == ["line", "agent", *CSV_COLUMNS[1:]]
    assert [(r[1], r[2]) for r in table[1:]] == [(a, t) for _, t, _, a in ROWS]
    # JSON lines: a missing key is null
    lines = tmp_path / "in.jsonl"
    lines.write_text('{"text": "查询余额", "session": 7}\n{"text": "i lost my card"}\n',
                     encoding="utf-8")
    out = tmp_path / "kept.jsonl"
    assert main(["predict", str(model), "--data", str(lines), "--out", str(out),
                 "--columns", ",session", "--quiet"]) == 0
    assert [(r["session"], r["text"]) for r in _jsonl(out)] == [(7, "查询余额"),
                                                                (None, "i lost my card")]


def test_resume_with_kept_columns_appends_to_the_same_layout(models, tmp_path, capsys):
    model = models["utf8.csv"]
    path = tmp_path / "log.csv"
    path.write_bytes(_csv_text(ROWS[:5]).encode("gbk"))
    out = tmp_path / "log_answers.csv"
    args = ["predict", str(model), "--data", str(path), "--out", str(out), "--columns",
            ",id", "--quiet"]
    assert main(args) == 0
    path.write_bytes(_csv_text(ROWS).encode("gbk"))  # the log grew
    assert main([*args, "--resume"]) == 0
    assert "resumed after line 6" in capsys.readouterr().err
    with out.open(newline="", encoding="utf-8") as f:
        table = list(csv.reader(f))
    assert table[0][:3] == ["line", "id", "text"]
    assert [(r[1], r[2]) for r in table[1:]] == [(i, t) for i, t, _, _ in ROWS]


def test_a_stream_none_of_whose_rows_decodes_fails_saying_what_to_try(models, files,
                                                                        tmp_path, capsys):
    model = models["utf8.csv"]
    out = tmp_path / "none.jsonl"
    # GBK named as UTF-8: every row has Chinese (its agent)
    assert main(["predict", str(model), "--data", str(files["gbk.csv"]), "--out", str(out),
                 "--encoding", "utf-8", "--quiet"]) == 1
    err = capsys.readouterr().err
    # (客 is BF CD in GBK: column 31 of "s000,i lost my card,card_lost,客服0")
    assert f"{files['gbk.csv']}: no usable rows (all {len(ROWS)} were bad: line 2: not " \
           f"UTF-8 (byte 0xbf at column 31); line 3: not UTF-8 (byte 0xbf at column 35)" in err
    assert "is --encoding utf-8 the file's encoding?" in err
    assert not out.exists() and not partial_path(out).exists() and not state_path(out).exists()
    # an encoding that is not detected: Latin-1
    latin = tmp_path / "latin.txt"
    latin.write_bytes("carte perdue, café\nsolde du compte épargne\n".encode("latin-1"))
    assert main(["predict", str(model), "--data", str(latin), "--out", str(out),
                 "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "no usable rows (all 2 were bad: line 1: not UTF-8 (byte 0xe9 at column 18); " \
           "line 2: not UTF-8 (byte 0xe9 at column 17))" in err and "gb18030" in err
    assert not out.exists() and not partial_path(out).exists()
    assert main(["predict", str(model), "--data", str(latin), "--out", str(out),
                 "--encoding", "latin-1", "--quiet"]) == 0
    assert [r["text"] for r in _jsonl(out)] == ["carte perdue, café", "solde du compte épargne"]


@pytest.mark.parametrize("extra, message", [
    (["--encoding", "gbkk"], "unknown encoding 'gbkk' (--encoding)"),
    (["--sheet", "S"], "--sheet S names a sheet of an Excel workbook"),
    (["--columns", ",text"], "--columns TEXT,text: the answers have a field text "
                             "already"),
    (["--columns", ",id,id"], "--columns TEXT,id,id: a column named twice"),
    (["--columns", ",session"], "no column 'session' (--columns TEXT,KEEP...) in the "
                                "header (id, text, label, agent)"),
])
def test_wrong_file_options_are_clear_errors(models, files, tmp_path, capsys, extra, message):
    out = tmp_path / "x.jsonl"
    assert main(["predict", str(models["utf8.csv"]), "--data", str(files["gbk.csv"]),
                 "--out", str(out), "--quiet", *extra]) == 1
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_file_options_are_refused_where_they_do_not_apply(models, files, tmp_path, capsys):
    model = str(models["utf8.csv"])
    assert main(["predict", model, "--data", str(files["chats.xlsx"]), "--out",
                 str(tmp_path / "x.jsonl"), "--encoding", "gbk"]) == 1
    assert "--encoding gbk is for text files" in capsys.readouterr().err
    assert main(["predict", model, "--columns", ",id", "--", "查询余额"]) == 1
    assert "--columns: for --data FILE" in capsys.readouterr().err
    assert main(["train", "--data", str(files["gbk.csv"]), "--encoding", "nope", "--model",
                 "tfidf", "--out", str(tmp_path / "m")]) == 1
    assert "unknown encoding 'nope'" in capsys.readouterr().err
    text = tmp_path / "t.txt"
    text.write_text("查询余额\n", encoding="utf-8")
    assert main(["predict", model, "--data", str(text), "--out", str(tmp_path / "y.jsonl"),
                 "--columns", ",id"]) == 1
    assert "is read as plain text" in capsys.readouterr().err
