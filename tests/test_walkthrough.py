"""benchmarks/walkthrough.py: the README's commands as it reads them, and its output checks."""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import walkthrough as W  # noqa: E402


def test_it_reads_the_readme_commands_in_order(tmp_path):
    commands = W.readme_commands(ROOT / "README.md")
    verbs = [c.split("|")[-1].split()[:2] for c in commands]
    # train before eval before predict, a server before the request it answers
    order = [v for v in verbs if v[0] in ("headwise", "curl")]
    assert [v[1] if v[0] == "headwise" else "curl" for v in order] == [
        "train", "eval", "predict", "predict", "serve", "curl"]
    assert all("\\" not in c and "#" not in c.split("'")[0] for c in commands)
    readme = tmp_path / "README.md"
    readme.write_text("# A\n## Intent recognition in four commands\n```bash\nheadwise train \\\n"
                      "  --data 'a # b.csv' --out r   # train\n\n```\n## Querying the service\n"
                      "```bash\ncurl -s x\n```\n## Next\n```bash\nnot me\n```\n")
    sections = ("Intent recognition in four commands", "Querying the service")
    assert W.readme_commands(readme, sections) == ["headwise train --data 'a # b.csv' --out r",
                                                   "curl -s x"]


def test_output_checks_hold_the_readme_to_its_promises(tmp_path):
    rec = {"intents": [{"intent": "a", "confidence": 0.9}], "out_of_scope": False,
           "slots": [], "top_k": [], "decision": None}
    assert W.check_output("echo x | headwise predict m --json", json.dumps(rec), tmp_path) == ""
    bad = json.dumps({"intents": []})
    assert "lacks" in W.check_output("headwise predict m --json x", bad, tmp_path)
    assert W.check_output('headwise predict m "a" "b"', "a -> x\nb -> y\n", tmp_path) == ""
    assert "1 lines for 2" in W.check_output('headwise predict m "a" "b"', "a\n", tmp_path)
    stream = "headwise predict m --data logs.csv --columns 消息,会话ID --out answers.csv"
    assert "was not written" in W.check_output(stream, "", tmp_path)
    (tmp_path / "answers.csv").write_text("line,会话ID,text\n2,S1,x\n", encoding="utf-8")
    assert W.check_output(stream, "", tmp_path) == ""
    assert W.check_output("headwise eval m --data t.csv", "accuracy 0.9 macro-F1 0.8",
                          tmp_path) == ""
    assert "was not written" in W.check_output("headwise train --data d --out r", "", tmp_path)
    body = json.dumps({"predictions": [{"intents": []}, {"intents": []}]})
    curl = "curl -s h -d '{\"texts\": [\"x\", \"y\"]}'"
    assert W.check_output(curl, body, tmp_path) == ""
    assert "1 predictions for 2" in W.check_output(
        curl, json.dumps({"predictions": [{"intents": []}]}), tmp_path)


def test_it_reads_the_walkthrough_pages_commands_and_writes_the_files_they_read(tmp_path):
    commands = W.doc_commands()
    verbs = [c.split()[1] if c.startswith("headwise") else c.split()[0] for c in commands]
    assert verbs == ["doctor", "doctor", "train", "eval", "explain", "predict", "predict",
                     "predict", "serve", "curl", "train", "eval"]
    assert all("\\" not in c and "#" not in c.split('"')[0] for c in commands)
    # every file a command reads is one the script writes before the page, or one an
    # earlier command writes
    written = {"logs.csv", "test.csv", "new_logs.csv", "logs_v2.csv", "test_v2.csv"}
    for command in commands:
        words = W.shlex.split(command)
        read = [words[2]] if words[1] == "doctor" else []
        read += [words[i + 1] for i, w in enumerate(words) if w == "--data"]
        assert set(read) <= written, command
        written |= {words[i + 1] for i, w in enumerate(words) if w == "--out-data"}
    page = tmp_path / "page.md"
    page.write_text("# A page\n\n```\nnot bash\n```\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no bash block"):
        W.doc_commands(page)


def _demo_split(path: Path, rows: list[tuple[str, str]]) -> None:
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label", "slices", "template"])
        writer.writerows([text, label, "", "t"] for text, label in rows)


def test_chat_logs_are_a_gbk_export_of_the_demo_corpus(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    _demo_split(data / "train.csv", [("我的卡丢了，帮我挂失", "report_card_loss"),
                                     ("退款怎么还没到账", "refund_query"),
                                     ("帮我提前还一部分房贷", "early_repayment")])
    _demo_split(data / "valid.csv", [("明天上海会下雨吗？", "oos"),
                                     ("帮我开通自动还款", "enable_autopay")])
    _demo_split(data / "test.csv", [("卡被偷了，赶紧冻结", "report_card_loss"),
                                    ("今天星期几？", "oos"), ("退款退到哪了", "refund_query")])
    counts = W.write_chat_logs(data, tmp_path)
    assert counts == {"logs.csv": 3, "test.csv": 2, "new_logs.csv": 2, "logs_v2.csv": 4,
                      "test_v2.csv": 3}

    def read(name: str) -> list[list[str]]:
        raw = (tmp_path / name).read_bytes()
        with pytest.raises(UnicodeDecodeError):
            raw.decode("utf-8")  # GBK, as Chinese Excel saves it
        return list(csv.reader(io.StringIO(raw.decode("gbk"))))

    logs = read("logs.csv")
    assert logs[0] == ["会话ID", "客户消息", "意图"]
    # an intent outside the first export is left out, out of scope is the team's label
    assert [r[1:] for r in logs[1:]] == [["我的卡丢了，帮我挂失", "report_card_loss"],
                                        ["明天上海会下雨吗？", "其他"],
                                        ["帮我开通自动还款", "enable_autopay"]]
    assert ["退款怎么还没到账", "refund_query"] in [r[1:] for r in read("logs_v2.csv")]
    assert [r[1:] for r in read("test_v2.csv")[1:]] == [
        ["卡被偷了，赶紧冻结", "report_card_loss"], ["今天星期几？", "其他"],
        ["退款退到哪了", "refund_query"]]
    new = read("new_logs.csv")
    assert new[0] == ["会话ID", "客户消息"] and [r[1] for r in new[1:]] == [
        "卡被偷了，赶紧冻结", "今天星期几？"]
    ids = [r[0] for name in counts for r in read(name)[1:]]
    assert len(set(ids)) == len(ids) and all(re.fullmatch(r"S\d{6}", i) for i in ids)


def _record(intent: str | None, confidence: float = 0.9, *, long_text=None,
            decision=("max_prob", 0.9, 0.5)) -> str:
    rec = {"text": "x", "intents": [] if intent is None else
           [{"intent": intent, "confidence": confidence}], "out_of_scope": intent is None,
           "slots": [], "top_k": [{"intent": intent or "bill_query", "confidence": confidence}],
           "decision": None if decision is None else dict(zip(
               ("score", "value", "threshold"), decision, strict=True)),
           "text_chars": 1, "long_text": long_text}
    return json.dumps(rec, ensure_ascii=False) + "\n"


def test_the_checks_assert_what_a_user_would_check(tmp_path):
    note = {"policy": "chunked", "tokens": 229, "max_length": 64, "chunks": 4, "window": 64,
            "stride": 31, "pooling": "max_confidence", "chunk": 2, "span": None}
    want = W.LONG_REQUEST[1]
    assert W.check_long_message(_record(want, long_text=note), tmp_path) == ""
    assert "not the request" in W.check_long_message(_record("bill_query", long_text=note),
                                                     tmp_path)
    assert "not the request" in W.check_long_message(
        _record(None, long_text=note, decision=("max_prob", 0.2, 0.5)), tmp_path)
    assert "no long_text" in W.check_long_message(_record(want), tmp_path)
    assert "2 lines" in W.check_long_message(_record(want) * 2, tmp_path)

    negated = W.NEGATION[1]
    assert "negated intent enable_autopay (0.81)" in W.check_negation(
        _record(negated, 0.81), tmp_path)
    assert W.check_negation(_record("cancel_autopay"), tmp_path) == ""
    assert W.check_negation(_record(None, decision=("max_prob", 0.3, 0.5)), tmp_path) == ""

    assert W.check_out_of_scope(_record(None, decision=("energy", -3.2, -1.5)), tmp_path) == ""
    assert "answered bill_query (0.90) in scope (max_prob 0.9 vs threshold 0.5)" in \
        W.check_out_of_scope(_record("bill_query"), tmp_path)
    assert "no decision" in W.check_out_of_scope(_record(None, decision=None), tmp_path)
    assert "does not reject" in W.check_out_of_scope(
        _record(None, decision=("max_prob", 0.7, 0.5)), tmp_path)
    assert "not a JSON line" in W.check_out_of_scope("oops\n", tmp_path)

    # the check texts: written by hand (no row of the demo's corpus), the long one several
    # times the model's 64 tokens around its request
    from headwise.demo.corpus import generate_demo_corpus

    rows = {ex.text for split in generate_demo_corpus(seed=0).values() for ex in split}
    assert not {W.LONG_MESSAGE, W.LONG_REQUEST[0], W.NEGATION[0],
                W.OUT_OF_SCOPE_QUESTION} & rows
    assert len(W.LONG_MESSAGE) > 3 * 64 and W.LONG_REQUEST[0] in W.LONG_MESSAGE
    assert [c.verify for c in W.CHECKS] == [W.check_long_message, W.check_negation,
                                          W.check_out_of_scope, W.check_gbk_stream]


def test_a_streamed_file_must_answer_every_row_with_its_kept_columns(tmp_path):
    rows = [("S100001", "我的卡丢了"), ("S100002", "今天星期几？"), ("S100003", "退款到哪了")]
    table = "会话ID,客户消息\r\n" + "".join(f"{s},{t}\r\n" for s, t in rows)
    (tmp_path / "new_logs.csv").write_bytes(table.encode("gbk"))
    answers = tmp_path / "new_logs.answers.jsonl"

    def write(ids: list[str]) -> None:
        answers.write_text("".join(
            json.dumps({"line": n + 2, "会话ID": s, **json.loads(_record("bill_query"))},
                       ensure_ascii=False) + "\n" for n, s in enumerate(ids)), encoding="utf-8")

    assert "was not written" in W.check_gbk_stream("", tmp_path)
    write([s for s, _ in rows])
    assert W.check_gbk_stream("", tmp_path) == ""
    write([s for s, _ in rows[:2]])
    assert "2 answers in new_logs.answers.jsonl for 3 rows" in W.check_gbk_stream("", tmp_path)
    write(["S100001", "S100003", "S100002"])
    assert "column 会话ID not carried: answer 2 has 'S100003', row has 'S100002'" in \
        W.check_gbk_stream("", tmp_path)
    (tmp_path / "new_logs.csv").write_bytes(table.encode("utf-8"))
    assert "is UTF-8, not GBK" in W.check_gbk_stream("", tmp_path)
    # a CSV answer file, as the page's `--out answers.csv` writes it
    stream = "headwise predict m --data new_logs.csv --columns 客户消息,会话ID --out answers.csv"
    (tmp_path / "answers.csv").write_text(
        "line,会话ID,text,text_chars,intents,out_of_scope,slots,top_k,decision,long_text\n"
        + "".join(f"{n + 2},{s},{t},{len(t)},[],true,[],[],,\n" for n, (s, t) in
                  enumerate(rows)), encoding="utf-8")
    assert W.check_output(stream, "", tmp_path) == ""
    (tmp_path / "new_logs.csv").write_bytes((table + "S100004,还有一行\r\n").encode("gbk"))
    assert "3 answers in answers.csv for 4 rows" in W.check_output(stream, "", tmp_path)


def test_doctor_must_write_its_report_and_the_cleaned_copy(tmp_path):
    fix = "headwise doctor logs.csv --columns 客户消息,意图 --out doctor/ --fix drop " \
          "--out-data logs.clean.csv"
    (tmp_path / "doctor").mkdir()
    (tmp_path / "doctor" / "index.html").write_text("<html></html>")
    assert W.check_output(fix, "", tmp_path) == "doctor/issues.csv, logs.clean.csv not written"
    (tmp_path / "doctor" / "issues.csv").write_text("row,issue\n")
    (tmp_path / "logs.clean.csv").write_text("text,label\n")
    assert W.check_output(fix, "", tmp_path) == ""


def test_the_section_names_each_part_and_the_failed_checks():
    steps = [{"part": p.part, "command": p.command, "seconds": 1.5, "ok": "negation" not in p.part,
              "why": "answered the negated intent enable_autopay (0.81)"}
             for p in W.plan(["headwise train --data d --out r"], ["headwise serve r &"],
                             "./run demo --quick")]
    data = {"command": "python benchmarks/walkthrough.py", "fresh": True, "date": "d",
            "provenance": None, "demo": "./run demo --quick", "planned": len(steps) + 1,
            "steps": steps}
    text = W.section(data)
    assert "| docs/walkthrough.md | `headwise serve r &` (until `/readyz` is 200) | 1.5 | ok |" \
        in text
    assert "| check: negation | `headwise predict runs/intent --json" in text
    assert f"{len(steps) - 1} of {len(steps) + 1} steps passed; 1 not run after the demo " \
           f"failed; checks failed: negation." in text
